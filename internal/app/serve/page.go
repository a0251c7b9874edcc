package serve

import (
	"embed"
	"net/http"
	"path"
	"strings"
)

// pageHTML is the question page: plain HTML and JS, no build step.
//
//go:embed web/index.html
var pageHTML []byte

// vendor is the page's charting library (uPlot, MIT), vendored from its
// pinned npm package (web/vendor/PIN, make web-vendor) so that the page
// loads nothing from another origin.
//
//go:embed web/vendor/uPlot.iife.min.js web/vendor/uPlot.min.css web/vendor/LICENSE.uPlot
var vendor embed.FS

// pageCSP allows only this origin: scripts and styles from the page and
// its assets, nothing framed, no base or form elsewhere.
const pageCSP = "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

func (s *Server) page(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", pageCSP)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(pageHTML)
}

// asset serves a vendored file of the page.
func (s *Server) asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	b, err := vendor.ReadFile("web/vendor/" + path.Base(name))
	if err != nil || path.Base(name) != name {
		writeJSON(w, http.StatusNotFound, apiError{Error: "no asset " + name})
		return
	}
	switch {
	case strings.HasSuffix(name, ".js"):
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case strings.HasSuffix(name, ".css"):
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	default:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "public, max-age=86400")
	_, _ = w.Write(b)
}
