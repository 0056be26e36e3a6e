package api

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

// OpenAPI is the OpenAPI 3.1 document of every route (api/openapi.json),
// served at GET /api/v1/openapi.json without a token. The integration
// tests validate every request and answer they exchange against it. Its
// body schemas are derived from the wire types (`go generate ./api/`,
// api/internal/openapigen); TestOpenAPIDocumentIsGenerated fails when the
// committed file is stale.
//
//go:generate go run ./internal/openapigen/gen
//go:embed openapi.json
var OpenAPI []byte

func openapiDoc(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/json", OpenAPI)
}
