// Package digest hashes strings: SHA-256 read in place, without the copy
// a []byte(s) conversion makes, and HMAC-SHA-256 under a secret key drawn
// for the process, for values that must not be matched outside it (a
// caller's request id, a password in a key that may be logged). Every
// package that hashes a string calls these (issue 23).
package digest

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"hash"
	"sync"
	"unsafe"
)

// Size is the length of a sum in bytes.
const Size = sha256.Size

// Sum is a SHA-256 or HMAC-SHA-256 sum.
type Sum = [Size]byte

// bytesOf is s's bytes in place. Only hash functions, which read their
// input and keep none of it, are given them.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// SHA256 is the SHA-256 of s. It neither copies s nor allocates: a copy of
// every tool result a pack stores was a quarter of its allocations.
func SHA256(s string) Sum { return sha256.Sum256(bytesOf(s)) }

// NewKey draws a 32-byte secret key from crypto/rand; a process draws its
// own, so its MACs tell nothing about another's.
func NewKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k) // crypto/rand.Read never fails (it panics instead)
	return k
}

// MAC computes HMAC-SHA-256 under one key. It is safe for concurrent use
// and allocates nothing per Sum (its hash states are pooled).
type MAC struct{ states sync.Pool }

// macState is a pooled HMAC state with the buffer its sum is written to
// (a local array handed to hash.Hash.Sum would escape to the heap).
type macState struct {
	h   hash.Hash
	out Sum
}

// NewMAC returns the MAC under key.
func NewMAC(key []byte) *MAC {
	key = append([]byte(nil), key...)
	m := &MAC{}
	m.states.New = func() any { return &macState{h: hmac.New(sha256.New, key)} }
	return m
}

// Sum is the HMAC-SHA-256 of s under the MAC's key.
func (m *MAC) Sum(s string) Sum {
	st := m.states.Get().(*macState)
	st.h.Reset()
	st.h.Write(bytesOf(s))
	st.h.Sum(st.out[:0])
	out := st.out
	m.states.Put(st)
	return out
}
