package httpapi

import (
	"io/fs"
	"net/http"
	"path"

	swaggerfiles "github.com/swaggo/files/v2"
)

// docsOperations are the API document and its page (operations.go joins
// the lists).
func docsOperations() []operation {
	return []operation{
		{name: "openapi", method: "GET", route: "/openapi.yaml", status: 200, serve: plain((*Server).openapi)},
		{name: "docs", method: "GET", route: "/docs", status: 200, serve: plain((*Server).docs)},
	}
}

// docsPage is the interactive API page of GET /docs: Swagger UI on
// /openapi.yaml. Its assets are embedded in the binary (no CDN), served
// under /docs/.
const docsPage = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>ordersvc API</title>
<link rel="stylesheet" href="/docs/swagger-ui.css">
<link rel="icon" type="image/png" href="/docs/favicon-32x32.png" sizes="32x32">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/swagger-ui-standalone-preset.js"></script>
<script>
window.ui = SwaggerUIBundle({
  url: "/openapi.yaml",
  dom_id: "#swagger-ui",
  deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
  layout: "StandaloneLayout"
});
</script>
</body>
</html>
`

// docsAssets are the Swagger UI files the page loads; nothing else of the
// embedded distribution is served.
var docsAssets = map[string]string{
	"swagger-ui.css":                  "text/css; charset=utf-8",
	"swagger-ui-bundle.js":            "text/javascript; charset=utf-8",
	"swagger-ui-standalone-preset.js": "text/javascript; charset=utf-8",
	"favicon-32x32.png":               "image/png",
}

func (s *Server) docs(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	_, _ = w.Write([]byte(docsPage))
}

func (s *Server) docsAsset(w http.ResponseWriter, r *http.Request) error {
	name := path.Base(r.URL.Path)
	ctype, ok := docsAssets[name]
	if !ok {
		return errNoSuchResource
	}
	b, err := fs.ReadFile(swaggerfiles.FS, name)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Cache-Control", "public, max-age=86400")
	_, _ = w.Write(b)
	return nil
}

func (s *Server) openapi(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(openAPI)
}
