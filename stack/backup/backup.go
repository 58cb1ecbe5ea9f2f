package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// The names inside a backup directory.
const (
	ManifestName   = "backup.json"  // written last: a directory without it is no backup
	StoreName      = "store"        // the store's checkpoint
	CryptoKeyName  = "crypto_key"   // crypto-key-file's copy
	PushAPIKeyName = "push_api_key" // push-api-key-file's copy
)

// Checkpointer is a store that can write a consistent copy of itself
// into a directory that does not exist yet (embedded.Store).
type Checkpointer interface {
	Checkpoint(ctx context.Context, dir string) error
}

// Files are the key files of the server's configuration a backup copies:
// a path "" is not set. CryptoKeyInline says crypto-key is set in the
// configuration itself: the backup then holds no key, and the manifest
// says so.
type Files struct {
	CryptoKeyFile   string
	PushAPIKeyFile  string
	CryptoKeyInline bool
}

// Manifest is backup.json: what the backup holds. Files maps a setting
// (crypto-key-file, push-api-key-file) to its copy's name in the backup.
type Manifest struct {
	Format  int               `json:"format"`
	Created time.Time         `json:"created"`
	By      string            `json:"by"` // "node": the running node wrote it; "command": autopush backup, no node running
	Store   string            `json:"store"`
	Files   map[string]string `json:"files"`
	// CryptoKeyInline: crypto-key was set in the configuration, so no
	// key file is in the backup; keep the key with it.
	CryptoKeyInline bool `json:"crypto_key_inline,omitempty"`
}

// manifestFormat is Manifest.Format: restore refuses another.
const manifestFormat = 1

// Write makes the backup dir: dir is created (its parent must exist) or
// must be empty; the store's checkpoint goes into dir/store, the key
// files' copies beside it, backup.json last. On an error it removes
// what it wrote. by is Manifest.By.
func Write(ctx context.Context, dir string, cp Checkpointer, files Files, by string) (Manifest, error) {
	m := Manifest{Format: manifestFormat, Created: time.Now().UTC(), By: by, Store: StoreName, Files: map[string]string{}, CryptoKeyInline: files.CryptoKeyInline}
	if err := makeEmptyDir(dir); err != nil {
		return m, err
	}
	err := write(ctx, dir, cp, files, &m)
	if err != nil {
		for _, name := range []string{ManifestName, StoreName, CryptoKeyName, PushAPIKeyName} {
			os.RemoveAll(filepath.Join(dir, name))
		}
	}
	return m, err
}

func write(ctx context.Context, dir string, cp Checkpointer, files Files, m *Manifest) error {
	if err := cp.Checkpoint(ctx, filepath.Join(dir, StoreName)); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	for _, f := range []struct{ setting, path, name string }{
		{"crypto-key-file", files.CryptoKeyFile, CryptoKeyName},
		{"push-api-key-file", files.PushAPIKeyFile, PushAPIKeyName},
	} {
		if f.path == "" {
			continue
		}
		if err := copyFile(f.path, filepath.Join(dir, f.name)); err != nil {
			return fmt.Errorf("backup: %s: %w", f.setting, err)
		}
		m.Files[f.setting] = f.name
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := writeSynced(filepath.Join(dir, ManifestName), append(b, '\n')); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return syncDir(dir)
}

// dirError is an error of the backup directory asked for (the
// caller's input), not of the store.
type dirError struct{ error }

func (e dirError) Unwrap() error { return e.error }

// makeEmptyDir creates dir (0700), or accepts it empty: an operator may
// make it beforehand with the owner the node writes as.
func makeEmptyDir(dir string) error {
	if !filepath.IsAbs(dir) {
		return dirError{fmt.Errorf("backup: %s is not an absolute path", dir)}
	}
	err := os.Mkdir(dir, 0o700)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrNotExist):
		return dirError{fmt.Errorf("backup: %s: its parent directory does not exist", dir)}
	case !errors.Is(err, os.ErrExist):
		return dirError{fmt.Errorf("backup: %w", err)}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return dirError{fmt.Errorf("backup: %s exists and is not a readable directory: %w", dir, err)}
	}
	if len(entries) > 0 {
		return dirError{fmt.Errorf("backup: %s exists and is not empty: a backup goes into a new or empty directory", dir)}
	}
	return nil
}

// copyFile copies the regular file src to dst (which must not exist),
// mode 0600, synced.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return errors.Join(out.Sync(), out.Close())
}

// writeSynced writes b into the new file path, mode 0600, synced.
func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// syncDir makes dir's entries durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// ReadManifest reads dir's backup.json.
func ReadManifest(dir string) (Manifest, error) {
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if errors.Is(err, os.ErrNotExist) {
		return m, fmt.Errorf("restore: %s is not a backup (no %s: autopush backup writes it last)", dir, ManifestName)
	}
	if err != nil {
		return m, fmt.Errorf("restore: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("restore: %s: %w", filepath.Join(dir, ManifestName), err)
	}
	if m.Format != manifestFormat || m.Store == "" || filepath.Base(m.Store) != m.Store {
		return m, fmt.Errorf("restore: %s: not a backup this version writes (format %d, store %q)", filepath.Join(dir, ManifestName), m.Format, m.Store)
	}
	return m, nil
}
