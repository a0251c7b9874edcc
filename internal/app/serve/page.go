package serve

import (
	_ "embed"
	"net/http"
)

// pageHTML is the question page: plain HTML and JS, no build step.
//
//go:embed web/index.html
var pageHTML []byte

func (s *Server) page(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(pageHTML)
}
