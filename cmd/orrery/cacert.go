package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net/http"
	"os"
)

// registerCACert adds --ca-cert to the flags of a command that connects to
// a kernel.
func registerCACert(fs *flag.FlagSet, file *string) {
	fs.StringVar(file, "ca-cert", "", "for https:// and wss://, also trust the certificates in this PEM file (a private CA, or the kernel's self-signed certificate)")
}

// httpClient returns the HTTP client that connects to a kernel: one that
// trusts the system's certificates and those in caFile, or nil (the
// client's default) when caFile is "". On Linux, SSL_CERT_FILE replaces
// the system's certificates as well.
func httpClient(caFile string) (*http.Client, error) {
	if caFile == "" {
		return nil, nil
	}
	data, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("read --ca-cert: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("--ca-cert %s holds no PEM certificate: give the CA's certificate, or the kernel's own (the file of its --tls-cert)", caFile)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr}, nil
}
