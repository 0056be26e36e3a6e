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
