package errno

import (
	"encoding/json"
	"net/http"
	"sort"
	"testing"
)

func TestErrnoTable(t *testing.T) {
	table := Table()
	seen := map[Code]bool{}
	for i, in := range table {
		if seen[in.Errno] {
			t.Errorf("errno %d twice", in.Errno)
		}
		seen[in.Errno] = true
		if in.Errno <= None {
			t.Errorf("entry %d: errno %d", i, in.Errno)
		}
		if http.StatusText(in.Status) == "" || in.Status < 400 {
			t.Errorf("errno %d: status %d", in.Errno, in.Status)
		}
		if in.Meaning == "" || in.Message == "" {
			t.Errorf("errno %d: meaning %q message %q", in.Errno, in.Meaning, in.Message)
		}
		if got, ok := in.Errno.Info(); !ok || got != in {
			t.Errorf("errno %d: Info %+v", in.Errno, got)
		}
		if in.Errno.Status() != in.Status {
			t.Errorf("errno %d: Status", in.Errno)
		}
	}
	if !sort.SliceIsSorted(table, func(i, j int) bool { return table[i].Errno < table[j].Errno }) {
		t.Error("table not in errno order")
	}
	// Every errno autopush's error-code table and autopush-rs define, with
	// the status they give it; and none they do not define.
	want := map[Code]int{
		101: 400, 102: 404, 103: 410, 104: 413, 105: 410, 106: 410, 108: 400,
		109: 401, 110: 400, 111: 400, 112: 400, 113: 400, 114: 400,
		201: 503, 202: 503, 900: 502, 901: 502, 902: 502, 903: 502, 999: 500,
	}
	if len(table) != len(want) {
		t.Errorf("%d entries, want %d", len(table), len(want))
	}
	for e, status := range want {
		if in, ok := e.Info(); !ok || in.Status != status {
			t.Errorf("errno %d: %+v %v, want status %d", e, in, ok, status)
		}
	}
	for _, e := range []Code{None, 107, 115, 203} {
		if _, ok := e.Info(); ok {
			t.Errorf("errno %d is not the reference's", e)
		}
	}
	// The copy is a copy.
	table[0].Status = 0
	if in, _ := MissingCryptoKeys.Info(); in.Status != 400 {
		t.Error("Table returned the table itself")
	}
}

func TestHTTPErrorJSON(t *testing.T) {
	e := InvalidEndpoint.HTTPError("")
	got := string(e.AppendJSON(nil))
	const want = `{"code":404,"errno":102,"error":"Not Found","message":"Invalid token","more_info":"http://autopush.readthedocs.io/en/latest/http.html#error-codes"}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	null := string(Unnumbered(400, "Invalid message ID").AppendJSON([]byte("x")))
	if null != `x{"code":400,"errno":null,"error":"Bad Request","message":"Invalid message ID","more_info":"`+MoreInfo+`"}` {
		t.Fatal(null)
	}
	for _, in := range Table() {
		for _, msg := range []string{"", "quote \" backslash \\ nl \n tab \t ctl \x01 <b>&amp; é \u2028 bad \xff\xfe end"} {
			body := in.Errno.HTTPError(msg).AppendJSON(nil)
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatalf("errno %d: %v: %s", in.Errno, err, body)
			}
			if len(m) != 5 || m["code"] != float64(in.Status) || m["errno"] != float64(in.Errno) ||
				m["error"] != http.StatusText(in.Status) || m["more_info"] != MoreInfo {
				t.Errorf("errno %d: %s", in.Errno, body)
			}
			wantMsg := msg
			if msg == "" {
				wantMsg = in.Message
			} else {
				wantMsg = "quote \" backslash \\ nl \n tab \t ctl \x01 <b>&amp; é \u2028 bad \ufffd\ufffd end"
			}
			if m["message"] != wantMsg {
				t.Errorf("errno %d: message %q", in.Errno, m["message"])
			}
			// Same bytes as encoding/json would write for valid UTF-8.
			if msg == "" {
				ref, _ := json.Marshal(in.Message)
				if sub := string(appendJSONString(nil, in.Message)); sub != string(ref) {
					t.Errorf("%s != %s", sub, ref)
				}
			}
		}
	}
}

// TestUnnumbered: an answer without an errno keeps the status and
// message it was given, whatever the table says of the status.
func TestUnnumbered(t *testing.T) {
	for _, status := range []int{400, 404, 408, 429, 503} {
		e := Unnumbered(status, "m")
		if *e != (HTTPError{Status: status, Errno: None, Message: "m"}) {
			t.Errorf("Unnumbered(%d): %+v", status, e)
		}
	}
}

func TestHTTPErrorUnknownErrno(t *testing.T) {
	e := Code(12345).HTTPError("x")
	if e.Status != 500 || Code(12345).Status() != 500 || e.Error() == "" {
		t.Errorf("%+v", e)
	}
}

func BenchmarkHTTPErrorAppendJSON(b *testing.B) {
	e := InvalidEndpoint.HTTPError("")
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = e.AppendJSON(buf[:0])
	}
}
