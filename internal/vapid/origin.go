package vapid

import (
	"strconv"
	"strings"
)

// normalizeOrigin normalises an http(s) origin as the reference's URL library
// compares them: scheme and host lower-cased, the default port dropped, a
// bare "/" path allowed. withPath lets any path, query or fragment follow
// (and drops it); otherwise anything after the authority but "/" fails.
func normalizeOrigin(s string, withPath bool) (string, bool) {
	i := strings.Index(s, "://")
	if i <= 0 {
		return "", false
	}
	scheme := strings.ToLower(s[:i])
	if scheme != "http" && scheme != "https" {
		return "", false
	}
	hostport := s[i+3:]
	if j := strings.IndexAny(hostport, "/?#"); j >= 0 {
		if !withPath && hostport[j:] != "/" {
			return "", false
		}
		hostport = hostport[:j]
	}
	if hostport == "" || strings.ContainsAny(hostport, "@ \t\r\n\\") {
		return "", false
	}
	host, port, ok := splitHostPort(hostport)
	if !ok {
		return "", false
	}
	host = strings.ToLower(host)
	if port, ok = normalizePort(scheme, port); !ok {
		return "", false
	}
	out := scheme + "://" + host
	if port != "" {
		out += ":" + port
	}
	return out, true
}

// splitHostPort splits an authority without userinfo into its host (an
// IPv6 literal keeps its brackets) and port ("" when none); false when
// it is malformed or the host is empty.
func splitHostPort(hostport string) (host, port string, ok bool) {
	host = hostport
	if hostport[0] == '[' {
		j := strings.IndexByte(hostport, ']')
		if j < 0 {
			return "", "", false
		}
		host = hostport[:j+1]
		if after := hostport[j+1:]; after != "" {
			if after[0] != ':' {
				return "", "", false
			}
			port = after[1:]
		}
	} else if j := strings.IndexByte(hostport, ':'); j >= 0 {
		host, port = hostport[:j], hostport[j+1:]
		if strings.IndexByte(port, ':') >= 0 {
			return "", "", false
		}
	}
	if host == "" || host == "[]" {
		return "", "", false
	}
	return host, port, true
}

// normalizePort checks a port's digits and range, and drops the scheme's
// default port (and leading zeros); "" stays "".
func normalizePort(scheme, port string) (string, bool) {
	if port == "" {
		return "", true
	}
	for k := 0; k < len(port); k++ {
		if port[k] < '0' || port[k] > '9' {
			return "", false
		}
	}
	n, err := strconv.Atoi(port)
	if err != nil || n > 65535 {
		return "", false
	}
	if (scheme == "https" && n == 443) || (scheme == "http" && n == 80) {
		return "", true
	}
	return strconv.Itoa(n), true
}
