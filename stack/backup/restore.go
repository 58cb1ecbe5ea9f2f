package backup

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Target is where a restore puts a backup: the configuration of the
// server that will run on it.
type Target struct {
	DataDir string
	Files   Files
	// CryptoKey is crypto-key when it is set inline (Files.CryptoKeyInline):
	// the backup's key file must hold the same key.
	CryptoKey string
	// Force moves a non-empty data-dir, or a key file that differs from
	// the backup's, aside (NAME.before-restore-TIME) instead of refusing.
	Force bool
	// Check opens the store in a directory and closes it: it fails while
	// a process holds it, and on a directory that is no store.
	Check func(dir string) error
}

// Restore puts the backup dir in place for t: the store into t.DataDir
// (which must be missing or empty, unless t.Force), each key file the
// backup holds where t's configuration reads it. Everything is checked
// before anything moves; the store copied is opened once (t.Check).
// It returns what it did, one line each.
func Restore(dir string, t Target) ([]string, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	keys, err := t.keyPlan(dir, m)
	if err != nil {
		return nil, err
	}
	var did []string
	aside, err := t.clearDataDir()
	if err != nil {
		return nil, err
	}
	if aside != "" {
		did = append(did, "moved the data-dir that was there to "+aside)
	}
	if err := copyStore(filepath.Join(dir, m.Store), t.DataDir); err != nil {
		return did, err
	}
	if err := t.Check(t.DataDir); err != nil {
		return did, fmt.Errorf("restore: the store copied into %s does not open: %w", t.DataDir, err)
	}
	did = append(did, "restored the store into "+t.DataDir)
	for _, k := range keys {
		line, err := k.put()
		if err != nil {
			return did, err
		}
		did = append(did, line)
	}
	return did, nil
}

// keyCopy is one key file of the backup and where it goes.
type keyCopy struct {
	setting, from, to string
	aside             bool // to holds another key: move it aside first (Force)
}

// keyPlan checks each key file of the backup against t's configuration
// and says which to copy where. A key the target already holds is left.
func (t Target) keyPlan(dir string, m Manifest) ([]keyCopy, error) {
	var plan []keyCopy
	for setting, name := range m.Files {
		to, ok := map[string]string{"crypto-key-file": t.Files.CryptoKeyFile, "push-api-key-file": t.Files.PushAPIKeyFile}[setting]
		if !ok || (name != CryptoKeyName && name != PushAPIKeyName) {
			return nil, fmt.Errorf("restore: %s names %s %q, not a file this version backs up", ManifestName, setting, name)
		}
		from := filepath.Join(dir, name)
		key, err := os.ReadFile(from)
		if err != nil {
			return nil, fmt.Errorf("restore: %w", err)
		}
		key = bytes.TrimSpace(key)
		if setting == "crypto-key-file" && to == "" {
			if t.CryptoKey != string(key) {
				return nil, fmt.Errorf("restore: crypto-key is not the key in %s: the backup's endpoints would not decrypt (set crypto-key-file instead, and restore puts the backup's key there)", from)
			}
			continue
		}
		if to == "" {
			continue // push-api-key-file not set: the key opens nothing here
		}
		held, err := os.ReadFile(to)
		switch {
		case err == nil && bytes.Equal(bytes.TrimSpace(held), key):
			continue
		case err == nil && !t.Force:
			return nil, fmt.Errorf("restore: %s %s holds another key than the backup's %s: pass -force to move it aside", setting, to, name)
		case err != nil && !errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("restore: %s: %w", setting, err)
		}
		plan = append(plan, keyCopy{setting: setting, from: from, to: to, aside: err == nil})
	}
	return plan, nil
}

func (k keyCopy) put() (string, error) {
	line := "restored " + k.setting + " " + k.to
	if k.aside {
		moved, err := moveAside(k.to)
		if err != nil {
			return "", fmt.Errorf("restore: %s: %w", k.setting, err)
		}
		line += " (the other key moved to " + moved + ")"
	}
	if err := os.MkdirAll(filepath.Dir(k.to), 0o700); err != nil {
		return "", fmt.Errorf("restore: %s: %w", k.setting, err)
	}
	if err := copyFile(k.from, k.to); err != nil {
		return "", fmt.Errorf("restore: %s: %w", k.setting, err)
	}
	return line, nil
}

// clearDataDir makes sure nothing is at t.DataDir: an empty directory is
// removed, a non-empty one refused, or with Force moved aside (aside
// names where) once Check says no process holds it.
func (t Target) clearDataDir() (aside string, err error) {
	entries, err := os.ReadDir(t.DataDir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("restore: data-dir: %w", err)
	case len(entries) == 0:
		return "", os.Remove(t.DataDir)
	case !t.Force:
		return "", fmt.Errorf("restore: data-dir %s is not empty: restore into a new data-dir, or stop the node and pass -force to move this one aside", t.DataDir)
	}
	if err := t.Check(t.DataDir); err != nil {
		return "", fmt.Errorf("restore: data-dir %s: %w (stop the node first)", t.DataDir, err)
	}
	return moveAside(t.DataDir)
}

// moveAside renames path to path.before-restore-TIME.
func moveAside(path string) (string, error) {
	to := path + ".before-restore-" + strings.ReplaceAll(time.Now().UTC().Format("20060102T150405.000000000"), ".", "")
	return to, os.Rename(path, to)
}

// copyStore copies the checkpoint from into to (which does not exist):
// into to.restoring first, renamed to to once every file is synced, so a
// failed restore leaves no half store at to.
func copyStore(from, to string) error {
	tmp := to + ".restoring"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		return fmt.Errorf("restore: the backup's store: %w", err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return fmt.Errorf("restore: the backup's store holds %s, not a regular file", e.Name())
		}
		if err := copyFile(filepath.Join(from, e.Name()), filepath.Join(tmp, e.Name())); err != nil {
			return fmt.Errorf("restore: %w", err)
		}
	}
	if err := errors.Join(syncDir(tmp), os.Rename(tmp, to), syncDir(filepath.Dir(to))); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	return nil
}
