package logprovider

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/autopush-go/autopush/sender/provider"
)

// Concurrent sends each append one whole line, with the notification's
// fields, to a file made (with its directory) mode 0600; every send is
// Sent.
func TestRecordsEachNotification(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "pushes.log")
	p, err := New(Config{File: path})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Limits().Validate(); err != nil {
		t.Fatalf("limits: %v", err)
	}
	const n = 200
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := p.Send(context.Background(), &provider.Notification{ID: fmt.Sprint(i), Platform: "IOS", PrototypeKey: "Hello",
				Token: fmt.Sprintf("user-%d", i), Message: fmt.Sprintf("Hi \"%d\"\nbye", i)})
			if res.Verdict != provider.Sent {
				t.Errorf("send %d: %+v", i, res)
			}
		}()
	}
	wg.Wait()
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("file %v mode %v", err, st)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l Line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if _, err := time.Parse(time.RFC3339, l.Time); err != nil || l.Platform != "IOS" || l.MessagePrototypeKey != "Hello" ||
			l.PushKey != "user-"+l.ID || l.Message != fmt.Sprintf("Hi \"%s\"\nbye", l.ID) {
			t.Errorf("line %+v", l)
		}
		seen[l.ID] = true
	}
	if len(seen) != n {
		t.Fatalf("%d notifications recorded, want %d", len(seen), n)
	}
}

// A file that cannot be written makes the send a retry, not a success.
func TestWriteFailureRetries(t *testing.T) {
	p, err := New(Config{File: filepath.Join(t.TempDir(), "pushes.log")})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	res := p.Send(context.Background(), &provider.Notification{ID: "1", Platform: "IOS", PrototypeKey: "Hello", Token: "u", Message: "m"})
	if res.Verdict != provider.Retry || res.Err == nil {
		t.Fatalf("send to a closed file: %+v", res)
	}
	if _, err := New(Config{File: ""}); err == nil {
		t.Fatal("New without a file")
	}
	if _, err := New(Config{File: t.TempDir()}); err == nil {
		t.Fatal("New over a directory")
	}
}
