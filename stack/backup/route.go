package backup

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/autopush-go/autopush/internal/errno"
)

// Route is the backup route of metrics-listen: POST {"dir": "/abs/path"}
// with "Authorization: Bearer " + Token; the answer is the Manifest (200)
// or an error body of internal/errno.
const Route = "POST /__backup__"

// Token is the bearer token of Route for a server whose crypto-key is
// key: an HMAC of it, so whoever can read the key (the operator, who
// backs it up) can ask, and the key itself never travels.
func Token(key string) string {
	mac := hmac.New(sha256.New, []byte(strings.TrimSpace(key)))
	mac.Write([]byte("autopush backup route"))
	return hex.EncodeToString(mac.Sum(nil))
}

// request is Route's body.
type request struct {
	Dir string `json:"dir"`
}

// Handler serves Route: it writes a backup of cp and files into the
// body's dir (Write, by "node") for a caller with token.
func Handler(cp Checkpointer, token string, files Files, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(auth), []byte(token)) != 1 {
			writeError(w, errno.InvalidAuth.HTTPError("the backup route takes Authorization: Bearer and the token autopush backup derives from the crypto-key"))
			return
		}
		var req request
		dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || req.Dir == "" {
			writeError(w, errno.Unnumbered(http.StatusBadRequest, `the body must be {"dir": "/absolute/path"}`))
			return
		}
		// A checkpoint copied to another file system takes as long as the
		// store is large: no write deadline for this answer.
		http.NewResponseController(w).SetWriteDeadline(time.Time{})
		start := time.Now()
		m, err := Write(r.Context(), req.Dir, cp, files, "node")
		if err != nil {
			log.Warn("backup failed", "dir", req.Dir, "error", err)
			status := http.StatusInternalServerError
			if errors.As(err, new(dirError)) {
				status = http.StatusBadRequest
			}
			writeError(w, errno.Unnumbered(status, err.Error()))
			return
		}
		log.Info("backup written", "dir", req.Dir, "took", time.Since(start).String())
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(m)
	})
}

func writeError(w http.ResponseWriter, e *errno.HTTPError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	w.Write(e.AppendJSON(nil))
}

// Ask asks the node whose metrics-listen is addr to write a backup into
// dir (absolute, as the node sees it).
func Ask(ctx context.Context, addr, token, dir string) (Manifest, error) {
	var m Manifest
	body, _ := json.Marshal(request{Dir: dir})
	method, path, _ := strings.Cut(Route, " ")
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return m, fmt.Errorf("backup: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return m, fmt.Errorf("backup: asking the node on metrics-listen %s: %w", addr, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(b, &e) != nil || e.Message == "" {
			e.Message = strings.TrimSpace(string(b))
		}
		return m, fmt.Errorf("backup: the node on metrics-listen %s answered %d: %s", addr, resp.StatusCode, e.Message)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("backup: the node's answer: %w", err)
	}
	return m, nil
}
