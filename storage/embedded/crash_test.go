package embedded

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/autopush-go/autopush/storage"
)

// crashEnv names the data directory of TestKillKeepsWhatWasAcked's child.
const crashEnv = "EMBEDDED_CRASH_CHILD_DIR"

// crashMemTable is the child's memtable size: small, so its WAL files
// are replaced (new, then recycled) many times before the kill.
const crashMemTable = 256 << 10

// crashIDs are the uaid and channel of write i.
func crashIDs(i uint64) (uuid.UUID, uuid.UUID) {
	var u, c uuid.UUID
	binary.BigEndian.PutUint64(u[8:], i+1)
	binary.BigEndian.PutUint64(c[8:], i+1)
	u[6], c[6] = 0x40, 0x40 // version 4
	u[8], c[8] = 0x80, 0x80
	return u, c
}

// TestKillKeepsWhatWasAcked kills (SIGKILL) a process writing new user
// agents' records and first channels (ConnectNew, 4 writers) at several
// points, reopens its store and finds every write that had returned:
// what the register reply promised survives a crash, across WAL files
// written into Pebble's zeros (zeroedWAL) and recycled ones.
func TestKillKeepsWhatWasAcked(t *testing.T) {
	if dir := os.Getenv(crashEnv); dir != "" {
		crashChild(dir)
		return
	}
	for _, after := range []int{300, 4000, 12000} {
		t.Run(strconv.Itoa(after), func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestKillKeepsWhatWasAcked$")
			cmd.Env = append(os.Environ(), crashEnv+"="+dir)
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var acked []uint64
			sc := bufio.NewScanner(out)
			for len(acked) < after && sc.Scan() {
				i, err := strconv.ParseUint(sc.Text(), 10, 64)
				if err != nil {
					t.Fatalf("child wrote %q", sc.Text())
				}
				acked = append(acked, i)
			}
			// Killed while writing: its next writes are in flight.
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			if len(acked) < after {
				t.Fatalf("child stopped after %d writes", len(acked))
			}
			logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
			zeroed := 0
			for _, l := range logs {
				if fi, err := os.Stat(l); err == nil && fi.Size() >= crashMemTable {
					zeroed++
				}
			}
			if zeroed == 0 {
				t.Errorf("no WAL file of the child's %d is as large as a memtable: not written into zeros", len(logs))
			}
			s := open(t, Config{Dir: dir, MemTableBytes: crashMemTable})
			for _, i := range acked {
				uaid, chid := crashIDs(i)
				u, has, err := s.Subscription(context.Background(), uaid, chid)
				if err != nil || !has || u.NodeID != "http://n1" {
					t.Fatalf("write %d of %d acked before the kill: has %v, record %+v, err %v", i, len(acked), has, u, err)
				}
			}
			t.Logf("%d acked writes found after the kill (%d WAL files, %d pre-sized)", len(acked), len(logs), zeroed)
		})
	}
}

// crashChild writes until killed, printing each write's index once it
// has returned.
func crashChild(dir string) {
	s, err := Open(Config{Dir: dir, MemTableBytes: crashMemTable})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var next atomic.Uint64
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				uaid, chid := crashIDs(i)
				u := storage.User{UAID: uaid, RouterType: storage.RouterWebPush, NodeID: "http://n1", ConnectedAt: int64(i) + 1}
				if err := s.ConnectNew(context.Background(), u, chid); err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				mu.Lock()
				fmt.Fprintln(w, i)
				w.Flush()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}
