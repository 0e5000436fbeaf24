package app

import "testing"

// BenchmarkHashToken is the token check's in-process part: every
// authenticated request hashes its bearer token to look it up.
func BenchmarkHashToken(b *testing.B) {
	token := "osk_h5fvFCWVBb5yu_88FIuuV5wRHmUv3qz_3u6yQ9qAjwU"
	b.ReportAllocs()
	for b.Loop() {
		if len(HashToken(token)) != 32 {
			b.Fatal("short hash")
		}
	}
}
