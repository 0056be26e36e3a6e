package ledger_test

import (
	"testing"

	"taskledger/ledger"
	"taskledger/ledger/ledgertest"
)

// TestStoreConformance runs the backend conformance suite on the bbolt file.
func TestStoreConformance(t *testing.T) {
	ledgertest.Run(t, ledgertest.Harness{New: func(t *testing.T) func() (ledger.Backend, error) {
		dir := t.TempDir()
		return func() (ledger.Backend, error) { return ledger.Open(dir, ledger.Options{}) }
	}})
}

// TestBlobsConformance runs the blob store conformance tests on the
// blob folder of a data directory.
func TestBlobsConformance(t *testing.T) {
	dir := t.TempDir()
	ledgertest.RunBlobs(t, func(t *testing.T) ledger.BlobStore {
		b, err := ledger.OpenBlobs(dir)
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}
