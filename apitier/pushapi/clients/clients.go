package clients

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/autopush-go/autopush/internal/filewatch"
	"github.com/autopush-go/autopush/storage"
)

// Scope is what a client may do.
type Scope string

// The scopes.
const (
	// Send: POST /push, and DELETE of its own pushes.
	Send Scope = "send"
	// Read: GET of its own pushes (by id, by state, by pushKey).
	Read Scope = "read"
	// Admin: everything, on every client's pushes and the bridged ones,
	// device tokens included (masked unless asked for).
	Admin Scope = "admin"
)

// Scopes lists every scope.
var Scopes = []Scope{Send, Read, Admin}

// Client is one client of the push API.
type Client struct {
	Name string
	// KeyHash is the SHA-256 of its bearer key.
	KeyHash [32]byte
	Scopes  []Scope
	// Rate is how many POST /push a second the client may have accepted
	// by each node: a token bucket with a burst of max(1, Rate). 0: no
	// limit.
	Rate float64
	// Outstanding is how many of its pushes may be not yet final
	// (SCHEDULED, PENDING, IN_MEMORY, RETRY). 0: no limit.
	Outstanding int
}

// Can reports whether c has scope s (an admin has every scope).
func (c *Client) Can(s Scope) bool {
	return slices.Contains(c.Scopes, s) || slices.Contains(c.Scopes, Admin)
}

// Limits of a client's entry.
const (
	// MaxRate bounds rate (POSTs a second).
	MaxRate = 1e6
	// MaxOutstanding bounds outstanding: counting a client's open pushes
	// reads up to that many index entries (storage.MaxOpenCount).
	MaxOutstanding = storage.MaxOpenCount
	// MaxNameLen bounds a client's name.
	MaxNameLen = 64
)

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// ValidName reports whether name can name a client: 1 to 64 letters,
// digits, '.', '_' or '-', the first a letter or digit (so it is safe in
// a metric's label and a log line).
func ValidName(name string) bool { return len(name) <= MaxNameLen && namePattern.MatchString(name) }

// Hash is the SHA-256 of a bearer key, as the clients file holds it.
func Hash(key string) [32]byte { return sha256.Sum256([]byte(key)) }

// KeyBytes is how many random bytes Mint puts in a key.
const KeyBytes = 32

// Mint returns a new random key: 32 bytes from crypto/rand in base64url
// without padding (43 characters).
func Mint() (string, error) {
	b := make([]byte, KeyBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("clients: mint a key: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// fileFormat is push-clients-file:
//
//	clients:
//	  marketing:
//	    key_sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
//	    scopes: [send, read]
//	    rate: 50
//	    outstanding: 10000
type fileFormat struct {
	Clients map[string]entry `yaml:"clients"`
}

type entry struct {
	KeySHA256   string   `yaml:"key_sha256"`
	Scopes      []string `yaml:"scopes"`
	Rate        float64  `yaml:"rate"`
	Outstanding int      `yaml:"outstanding"`
}

// ErrNoClients refuses a file that names no client and does not say so:
// empty, only comments, or "clients:" with nothing under it.
var ErrNoClients = errors.New(`clients: the file names no client: it is empty, or only comments, or "clients:" with nothing under it, ` +
	`as a file caught half-written is (write the new file beside it and rename it over); "clients: {}" closes the push API on purpose`)

// Parse reads a clients file's content: every entry checked, unknown
// fields refused. A file must name its clients under "clients:", or say
// "clients: {}" for none: every other way of naming none is what a file
// read while it is rewritten in place looks like (its first bytes, cut
// before its first client), and is refused (ErrNoClients). "{}" is never
// a prefix of a file with clients in it.
func Parse(b []byte) ([]Client, error) {
	var f fileFormat
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); errors.Is(err, io.EOF) {
		return nil, ErrNoClients
	} else if err != nil {
		return nil, fmt.Errorf("clients: %w", err)
	}
	if f.Clients == nil {
		return nil, ErrNoClients
	}
	out := make([]Client, 0, len(f.Clients))
	for name, e := range f.Clients {
		c, err := e.client(name)
		if err != nil {
			return nil, fmt.Errorf("clients: client %q: %w", name, err)
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Client) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (e *entry) client(name string) (Client, error) {
	c := Client{Name: name, Rate: e.Rate, Outstanding: e.Outstanding}
	if !ValidName(name) {
		return c, fmt.Errorf("a name is 1 to %d letters, digits, '.', '_' or '-', starting with a letter or digit", MaxNameLen)
	}
	h, err := hex.DecodeString(e.KeySHA256)
	if err != nil || len(h) != sha256.Size {
		return c, fmt.Errorf("key_sha256 must be the 64 hex digits of the key's SHA-256 (tools/cmd/pushclient prints it)")
	}
	copy(c.KeyHash[:], h)
	if len(e.Scopes) == 0 {
		return c, fmt.Errorf("scopes: give at least one of send, read, admin")
	}
	for _, s := range e.Scopes {
		if !slices.Contains(Scopes, Scope(s)) {
			return c, fmt.Errorf("scopes: %q is not send, read or admin", s)
		}
		if !slices.Contains(c.Scopes, Scope(s)) {
			c.Scopes = append(c.Scopes, Scope(s))
		}
	}
	if math.IsNaN(e.Rate) || e.Rate < 0 || e.Rate > MaxRate {
		return c, fmt.Errorf("rate: %v POSTs a second is outside 0..%g (0: no limit)", e.Rate, float64(MaxRate))
	}
	if e.Outstanding < 0 || e.Outstanding > MaxOutstanding {
		return c, fmt.Errorf("outstanding: %d is outside 0..%d (0: no limit)", e.Outstanding, MaxOutstanding)
	}
	return c, nil
}

// Entry is c as an entry of push-clients-file, indented to go under its
// "clients:" line (Parse reads it back as c).
func Entry(c Client) string {
	scopes := make([]string, len(c.Scopes))
	for i, s := range c.Scopes {
		scopes[i] = string(s)
	}
	return fmt.Sprintf("  %s:\n    key_sha256: %x\n    scopes: [%s]\n    rate: %s # POSTs a second per node (0: no limit)\n    outstanding: %d # pushes not yet final (0: no limit)\n",
		c.Name, c.KeyHash, strings.Join(scopes, ", "), strconv.FormatFloat(c.Rate, 'g', -1, 64), c.Outstanding)
}

// FromKeys makes the clients of push-api-keys: key i (from 1) is the
// admin client "key-i" without quotas, as every key was before clients.
func FromKeys(keys []string) []Client {
	out := make([]Client, len(keys))
	for i, k := range keys {
		out[i] = Client{Name: "key-" + strconv.Itoa(i+1), KeyHash: Hash(k), Scopes: []Scope{Admin}}
	}
	return out
}

// Set is a fixed set of clients. Safe for concurrent use (never changed).
type Set struct {
	list []Client
}

// NewSet checks that no two clients share a name or a key.
func NewSet(cs ...[]Client) (*Set, error) {
	s := &Set{}
	names := map[string]bool{}
	hashes := map[[32]byte]string{}
	for _, list := range cs {
		for _, c := range list {
			if names[c.Name] {
				return nil, fmt.Errorf("clients: %q is named twice (push-api-keys are key-1, key-2, ...)", c.Name)
			}
			if other, dup := hashes[c.KeyHash]; dup {
				return nil, fmt.Errorf("clients: %q and %q have the same key", other, c.Name)
			}
			names[c.Name], hashes[c.KeyHash] = true, c.Name
			s.list = append(s.list, c)
		}
	}
	return s, nil
}

// Lookup returns the client whose key is key. The key's hash is compared
// with every client's, each in constant time, so the time taken says
// nothing of which client (if any) matched, nor how closely.
func (s *Set) Lookup(key string) (Client, bool) {
	h := Hash(key)
	found := -1
	for i := range s.list {
		if subtle.ConstantTimeCompare(h[:], s.list[i].KeyHash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Client{}, false
	}
	return s.list[found], true
}

// List returns the clients, the file's by name, then push-api-keys'.
func (s *Set) List() []Client { return slices.Clone(s.list) }

// Len is how many clients there are.
func (s *Set) Len() int { return len(s.list) }

// Registry is the clients in use: push-api-keys' and push-clients-file's,
// the file reloaded on demand (Reload: SIGHUP) and when it changes
// (Watch). A file that does not load keeps the clients in use. Safe for
// concurrent use.
type Registry struct {
	file *filewatch.File[*Set]
}

// Load reads the clients of path ("" for none) and keys (push-api-keys).
// Every reload of the file checks it against keys again.
func Load(path string, keys []string) (*Registry, error) {
	fixed := FromKeys(keys)
	if path == "" {
		s, err := NewSet(fixed)
		if err != nil {
			return nil, err
		}
		return &Registry{filewatch.Fixed(s)}, nil
	}
	f, err := filewatch.Load(path, func(b []byte) (*Set, error) {
		cs, err := Parse(b)
		if err != nil {
			return nil, err
		}
		return NewSet(cs, fixed)
	})
	if err != nil {
		return nil, fmt.Errorf("push-clients-file: %w", err)
	}
	return &Registry{f}, nil
}

// Clients is the set in use.
func (r *Registry) Clients() *Set { return r.file.Get() }

// Reload reads the file again (on SIGHUP); on any error the clients in
// use stay.
func (r *Registry) Reload() error {
	_, err := r.file.Reload()
	return err
}

// Watch reloads the file every poll when it changed, until ctx ends,
// handing each outcome to reloaded (nil: the new clients are in use).
func (r *Registry) Watch(ctx context.Context, poll time.Duration, reloaded func(error)) {
	r.file.Watch(ctx, poll, reloaded)
}

// HasFile reports whether the clients come from a file too.
func (r *Registry) HasFile() bool { return r.file.Path() != "" }
