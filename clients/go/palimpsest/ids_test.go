package palimpsest

import "testing"

// The same derivation as the TypeScript and Python clients (sha256 of "key/index", 24 hex digits).
func TestDerivedIDIsTheSameInEveryClient(t *testing.T) {
	if got := DerivedID("u", "k", 0); got != "u-7306c07d1e16ba09572c2397" {
		t.Fatal(got)
	}
}
