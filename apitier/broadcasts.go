package apitier

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/cloudwego/hertz/pkg/app"

	"github.com/autopush-go/autopush/apitier/httpapi"
	"github.com/autopush-go/autopush/internal/errno"
	"github.com/autopush-go/autopush/storage"
)

// Broadcasts (megaphone): this tier speaks Megaphone's API, so a
// self-hoster needs no Megaphone and a publisher written for Megaphone
// (Remote Settings' kinto-megaphone) works unchanged:
//
//	PUT /v1/broadcasts/{broadcaster}/{channel}  body: the new version (text)
//	    201 {"code":201} a new broadcast, 200 {"code":200} a new version
//	GET /v1/broadcasts
//	    200 {"code":200,"broadcasts":{"broadcaster/channel":"version",...}}
//
// Both need "Authorization: Bearer <token>": a token of broadcast-tokens
// (publish and read) or, for the GET, of broadcast-reader-tokens; no
// token configured turns both off (401). The versions are stored (one
// storage table every connection node polls), so every node sees them;
// the GET serves connection nodes of another deployment, or the
// reference's autoconnect, as their megaphone-api-url.

var (
	errBroadcastAuth    = errno.InvalidAuth.HTTPError("Invalid Authentication")
	errBroadcastVersion = &errno.HTTPError{Status: http.StatusBadRequest, Errno: errno.None,
		Message: "the broadcast id and version must be 1 to 256 visible ASCII characters"}
)

// broadcastAuth reports whether the request's bearer token is one of
// broadcast-tokens (or, with readOnly, of broadcast-reader-tokens too).
// Tokens compare in constant time.
func (s *Server) broadcastAuth(c *app.RequestContext, readOnly bool) bool {
	auth := string(c.Request.Header.Peek("Authorization"))
	scheme, tok, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || tok == "" {
		return false
	}
	match := false
	check := func(list []string) {
		for _, want := range list {
			if subtle.ConstantTimeCompare([]byte(tok), []byte(want)) == 1 {
				match = true
			}
		}
	}
	check(s.cfg.BroadcastTokens)
	if readOnly {
		check(s.cfg.BroadcastReaderTokens)
	}
	return match
}

func (s *Server) refuseBroadcast(c *app.RequestContext, st *reqState) {
	s.writeError(c, st, errBroadcastAuth)
	c.Response.Header.Set("WWW-Authenticate", `Bearer realm="broadcasts"`)
}

// handlePublishBroadcast sets a broadcast's version (Megaphone's PUT).
func (s *Server) handlePublishBroadcast(ctx context.Context, c *app.RequestContext, st *reqState) {
	if !s.broadcastAuth(c, false) {
		s.refuseBroadcast(c, st)
		return
	}
	id := c.Param("broadcaster") + "/" + c.Param("channel")
	version, e := readVersion(c, st)
	if e != nil {
		s.writeError(c, st, e)
		return
	}
	if storage.ValidateBroadcast(id, version) != nil {
		s.writeError(c, st, errBroadcastVersion)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StorageTimeout)
	defer cancel()
	// A read first, for Megaphone's 201 on a new broadcast: this is an
	// operator's route, not the push path.
	start := time.Now()
	current, err := s.store.Broadcasts(ctx)
	s.metrics.storage(start, err)
	if err == nil {
		start = time.Now()
		err = s.store.PutBroadcast(ctx, id, version)
		s.metrics.storage(start, err)
	}
	if err != nil {
		s.log.Warn("publish broadcast: storage", "error", err)
		s.writeError(c, st, errStorage)
		return
	}
	code := http.StatusOK
	if _, known := current[id]; !known {
		code = http.StatusCreated
	}
	s.log.Info("broadcast published", "id", id, "version", version)
	httpapi.WriteJSON(c, code, map[string]int{"code": code})
}

// handleBroadcasts lists every broadcast (Megaphone's GET).
func (s *Server) handleBroadcasts(ctx context.Context, c *app.RequestContext, st *reqState) {
	if !s.broadcastAuth(c, true) {
		s.refuseBroadcast(c, st)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StorageTimeout)
	defer cancel()
	start := time.Now()
	all, err := s.store.Broadcasts(ctx)
	s.metrics.storage(start, err)
	if err != nil {
		s.log.Warn("list broadcasts: storage", "error", err)
		s.writeError(c, st, errStorageRead)
		return
	}
	b, _ := json.Marshal(map[string]any{"code": http.StatusOK, "broadcasts": all})
	c.Data(http.StatusOK, "application/json", b)
}

// readVersion reads a published version: the body, whole
// (readBodyUpTo), at most storage.MaxBroadcastLen bytes (longer is 400,
// as any invalid version).
func readVersion(c *app.RequestContext, st *reqState) (string, *errno.HTTPError) {
	var buf []byte
	b, e := readBodyUpTo(c, &buf, storage.MaxBroadcastLen, errBroadcastVersion)
	if e != nil {
		return "", e
	}
	st.bodyRead = true
	return string(b), nil
}
