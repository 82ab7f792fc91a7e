// Package web is Orrery's browser client: a page served by the kernel at
// GET /, with its assets embedded in the binary. The sources are in src/
// and are built into dist/ by esbuild (node build.mjs); dist/ is checked
// in, so go build alone needs no Node.
package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed dist
var dist embed.FS

// CSP is the page's Content-Security-Policy: scripts and styles only from
// the kernel itself (no inline script), connections only back to it, no
// frames, no plugins, images only from itself or data: URLs (image
// surfaces).
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// asset is one embedded file with its validator.
type asset struct {
	body  []byte
	gz    []byte // body gzipped once, at start
	ctype string
	etag  string
}

// Handler serves the page at / and its assets at /assets/…; any other path
// is not found. Every answer carries the CSP, nosniff, no-referrer and
// frame denial; assets are revalidated by ETag.
type Handler struct {
	files map[string]asset
}

// New returns the Handler over the embedded build.
func New() *Handler {
	h := &Handler{files: map[string]asset{}}
	types := map[string]string{".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
	_ = fs.WalkDir(dist, "dist", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := dist.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		name := path.Base(p)
		url := "/assets/" + name
		if name == "index.html" {
			url = "/"
		}
		var gz bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
		zw.Write(b)
		zw.Close()
		h.files[url] = asset{body: b, gz: gz.Bytes(), ctype: types[path.Ext(name)], etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	return h
}

// GzipBytes returns the gzipped size of the page and its assets, as served
// to a browser that accepts gzip.
func (h *Handler) GzipBytes() int {
	n := 0
	for _, a := range h.files {
		n += len(a.gz)
	}
	return n
}

// Paths returns the URL paths the handler serves.
func (h *Handler) Paths() []string {
	out := make([]string, 0, len(h.files))
	for p := range h.files {
		out = append(out, p)
	}
	return out
}

// SetHeaders writes the security headers every answer of the page carries.
func SetHeaders(hd http.Header) {
	hd.Set("Content-Security-Policy", CSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	SetHeaders(w.Header())
	a, ok := h.files[r.URL.Path]
	if !ok {
		http.Error(w, "no such page: the web client is at /", http.StatusNotFound)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the web client is read with GET", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", a.ctype)
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Vary", "Accept-Encoding")
	body, etag := a.body, a.etag
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		w.Header().Set("Content-Encoding", "gzip")
		body, etag = a.gz, strings.TrimSuffix(a.etag, `"`)+`-gz"`
	}
	w.Header().Set("ETag", etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}
