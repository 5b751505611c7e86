package policy

import (
	"strconv"

	"github.com/relaygate/gateway/config"
)

// hostRewrite is the compiled `authority` of a redirect or URL rewrite.
type hostRewrite struct {
	kind uint8
	host []byte // hostFull: the host part; hostName: the name
	port []byte // hostFull: the port part (nil if none); hostPort: the port
}

const (
	hostKeep uint8 = iota // unset, "auto" or "none"
	hostFull
	hostName
	hostPort
)

func compileHostRewrite(field string, cfg *config.HostRewrite) (hostRewrite, error) {
	switch {
	case cfg == nil, cfg.Auto, cfg.None:
		return hostRewrite{}, nil
	case cfg.Full != "":
		if msg := checkHostPort(cfg.Full); msg != "" {
			return hostRewrite{}, fieldErrorf(field+".full", "%s", msg)
		}
		host, port, _ := splitAuthority([]byte(cfg.Full))
		return hostRewrite{kind: hostFull, host: host, port: port}, nil
	case cfg.Host != "":
		if msg := checkHost(cfg.Host); msg != "" {
			return hostRewrite{}, fieldErrorf(field+".host", "%s", msg)
		}
		return hostRewrite{kind: hostName, host: []byte(cfg.Host)}, nil
	case cfg.Port != 0:
		if cfg.Port < 1 || cfg.Port > 65535 {
			return hostRewrite{}, fieldErrorf(field+".port", "must be between 1 and 65535")
		}
		return hostRewrite{kind: hostPort, port: strconv.AppendInt(nil, int64(cfg.Port), 10)}, nil
	}
	return hostRewrite{}, fieldErrorf(field, "must be \"auto\", \"none\" or one of full, host, port")
}
