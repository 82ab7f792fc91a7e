package server_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkBoundary measures POST /control session.list from the web
// client (its own origin, its cookie, Sec-Fetch-Site) through the whole
// server, against the same request refused at the boundary (a rebound
// Host), which costs the boundary's checks and a refusal alone.
func BenchmarkBoundary(b *testing.B) {
	r := newTxRig(b, txRigOptions{})
	page := httptest.NewRecorder()
	r.srv.ServeHTTP(page, httptest.NewRequest(http.MethodGet, "http://127.0.0.1:7411/", nil))
	cookie := page.Result().Cookies()[0]
	body := `{"t":"session.list","id":"l"}`
	for _, bc := range []struct{ name, host string }{{"served", "127.0.0.1:7411"}, {"refused", "evil.example:7411"}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "http://"+bc.host+"/control", strings.NewReader(body))
				req.RemoteAddr = "127.0.0.1:50000"
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Origin", "http://"+bc.host)
				req.Header.Set("Sec-Fetch-Site", "same-origin")
				req.AddCookie(cookie)
				w := httptest.NewRecorder()
				r.srv.ServeHTTP(w, req)
				if want := map[string]int{"served": 200, "refused": 403}[bc.name]; w.Code != want {
					b.Fatalf("POST /control = %d %s, want %d", w.Code, w.Body, want)
				}
			}
		})
	}
}
