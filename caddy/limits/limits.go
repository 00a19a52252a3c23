// Package limits is the gateway's limiter: a Caddy HTTP handler that bounds, per client, the request rate and
// the requests in flight, and answers past either with a status (429 or 503), a Retry-After and a JSON error.
//
// Caddy's standard build has no limiter; inferry's gateway (caddy/main.go) is that build plus this module.
package limits

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule(Limits{})
}

// Limits is the handler http.handlers.inferry_limits.
type Limits struct {
	// Zone names the counters; handlers with one zone name share them, and they outlive a config reload.
	Zone string `json:"zone"`
	// Key is whose requests are counted together: a placeholder ({http.vars.client_ip}) or a constant. A request
	// whose placeholder is unknown or empty is an error (500), never a bucket shared by all.
	Key string `json:"key,omitempty"`
	// PerMinute requests a minute, with up to Burst at once after a quiet spell (0: no rate limit).
	PerMinute float64 `json:"per_minute,omitempty"`
	Burst     int     `json:"burst,omitempty"`
	// MaxInFlight requests at once, held ones included (0: no bound).
	MaxInFlight int `json:"max_in_flight,omitempty"`
	// StatusCode past a limit: 429 (a client's own limit) by default, 503 for the gateway's whole queue.
	StatusCode int `json:"status_code,omitempty"`
	// RetryAfter is the Retry-After, in seconds, past MaxInFlight (past the rate, the time until it allows one).
	RetryAfter int `json:"retry_after_s,omitempty"`
	// Message is the error's text in the JSON body.
	Message string `json:"message,omitempty"`
	// IPv6Prefix counts an IPv6 key by its first IPv6Prefix bits (0: as it is). One host is routinely given a
	// whole /64, so a key of its full address would give it 2^64 buckets.
	IPv6Prefix int `json:"ipv6_prefix,omitempty"`

	zone *zone
}

// CaddyModule returns the Caddy module information.
func (Limits) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.inferry_limits", New: func() caddy.Module { return new(Limits) }}
}

// Provision finds (or makes) the handler's zone.
func (l *Limits) Provision(caddy.Context) error {
	if l.StatusCode == 0 {
		l.StatusCode = http.StatusTooManyRequests
	}
	if l.RetryAfter == 0 {
		l.RetryAfter = 1
	}
	if l.Message == "" {
		l.Message = "too many requests"
	}
	l.zone = zoneFor(l.Zone)
	return nil
}

// Validate refuses a config that could not mean what it says.
func (l *Limits) Validate() error {
	switch {
	case l.Zone == "":
		return fmt.Errorf("inferry_limits: zone is required")
	case l.PerMinute < 0 || l.Burst < 0 || l.MaxInFlight < 0 || l.RetryAfter < 0:
		return fmt.Errorf("inferry_limits %s: per_minute, burst, max_in_flight and retry_after_s must not be "+
			"negative", l.Zone)
	case l.PerMinute > 0 && l.Burst < 1:
		return fmt.Errorf("inferry_limits %s: a rate needs a burst of at least 1", l.Zone)
	case l.IPv6Prefix < 0 || l.IPv6Prefix > 128:
		return fmt.Errorf("inferry_limits %s: ipv6_prefix %d is not a prefix length (0 to 128)", l.Zone, l.IPv6Prefix)
	case l.StatusCode < 400 || l.StatusCode > 599:
		return fmt.Errorf("inferry_limits %s: status_code %d is not an error status", l.Zone, l.StatusCode)
	}
	return nil
}

func (l Limits) rule() rule {
	return rule{perSecond: l.PerMinute / 60, burst: l.Burst, maxInFlight: l.MaxInFlight}
}

// ServeHTTP admits the request, or answers StatusCode with Retry-After without passing it on.
func (l Limits) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	key := l.Key
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		// An unknown or empty placeholder must fail loudly: as "" it would put every client in one bucket.
		var err error
		if key, err = repl.ReplaceOrErr(l.Key, true, true); err != nil {
			return caddyhttp.Error(http.StatusInternalServerError, fmt.Errorf("inferry_limits %s: key %q: %w",
				l.Zone, l.Key, err))
		}
	}
	key = l.group(key)
	ok, wait := l.zone.admit(key, time.Now(), l.rule())
	if !ok {
		if wait == 0 {
			wait = l.RetryAfter
		}
		kind := "rate_limit_exceeded"
		if l.StatusCode == http.StatusServiceUnavailable {
			kind = "service_unavailable"
		}
		body, _ := json.Marshal(map[string]any{"error": map[string]string{
			"message": fmt.Sprintf("%s; retry in %d s", l.Message, wait), "type": kind}})
		w.Header().Set("Retry-After", strconv.Itoa(wait))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(l.StatusCode)
		_, err := w.Write(body)
		return err
	}
	defer l.zone.done(key)
	return next.ServeHTTP(w, r)
}

// group is the key counted for key: an IPv6 address's network of IPv6Prefix bits, or key itself.
func (l Limits) group(key string) string {
	if l.IPv6Prefix == 0 {
		return key
	}
	addr, err := netip.ParseAddr(key)
	if err != nil || !addr.Is6() || addr.Is4In6() {
		return key
	}
	return netip.PrefixFrom(addr.WithZone(""), l.IPv6Prefix).Masked().String()
}

var (
	_ caddy.Provisioner           = (*Limits)(nil)
	_ caddy.Validator             = (*Limits)(nil)
	_ caddyhttp.MiddlewareHandler = (*Limits)(nil)
)
