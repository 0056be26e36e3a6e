// Command gen rewrites api/openapi.json from the wire types
// (openapigen.Generate); `go generate ./api/` runs it.
package main

import (
	"log"
	"os"

	"taskledger/api/internal/openapigen"
)

func main() {
	const path = "openapi.json"
	doc, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	out, err := openapigen.Generate(doc)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		log.Fatal(err)
	}
}
