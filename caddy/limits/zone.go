package limits

import (
	"math"
	"sync"
	"time"
)

// maxClients bounds one zone's memory: past it, a client not seen before is refused until idle ones are swept.
// A variable so that tests can fill a zone.
var maxClients = 1 << 20

// fullSweepEvery spaces the sweeps of a full zone: a sweep walks every client, and a flood of new clients would
// otherwise make each request pay for one.
const fullSweepEvery = time.Second

// zones outlive a config reload (adding or removing an API key): counters and requests in flight carry over.
var zones sync.Map // name -> *zone

// client is one key's (or address's) token bucket and requests in flight.
type client struct {
	tokens   float64
	last     time.Time
	inFlight int
}

// zone holds the clients of one limit.
type zone struct {
	mu        sync.Mutex
	clients   map[string]*client
	lastSweep time.Time
}

func zoneFor(name string) *zone {
	z, _ := zones.LoadOrStore(name, &zone{clients: map[string]*client{}})
	return z.(*zone)
}

// rule is what one handler allows: perSecond tokens a second up to burst (0: no rate), and maxInFlight at once
// (0: no bound).
type rule struct {
	perSecond   float64
	burst       int
	maxInFlight int
}

// admit takes one request for key at now: ok, or refused with the seconds to wait before trying again (0 when
// the refusal is for requests in flight: the handler says when to come back).
func (z *zone) admit(key string, now time.Time, r rule) (ok bool, wait int) {
	z.mu.Lock()
	defer z.mu.Unlock()
	// Sweep before the lookup: a swept client starts again as a new one would, with a full bucket.
	since := now.Sub(z.lastSweep)
	if since > time.Minute || (len(z.clients) >= maxClients && since >= fullSweepEvery) {
		z.sweep(now, r)
	}
	c := z.clients[key]
	if c == nil {
		if len(z.clients) >= maxClients {
			return false, 0
		}
		c = &client{tokens: float64(r.burst), last: now}
		z.clients[key] = c
	}
	if r.perSecond > 0 {
		c.tokens = math.Min(float64(r.burst), c.tokens+now.Sub(c.last).Seconds()*r.perSecond)
		c.last = now
	}
	if r.maxInFlight > 0 && c.inFlight >= r.maxInFlight {
		return false, 0
	}
	if r.perSecond > 0 {
		if c.tokens < 1 {
			return false, int(math.Ceil((1 - c.tokens) / r.perSecond))
		}
		c.tokens--
	}
	c.inFlight++
	return true, 0
}

// done ends one admitted request of key.
func (z *zone) done(key string) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if c := z.clients[key]; c != nil && c.inFlight > 0 {
		c.inFlight--
	}
}

// sweep forgets clients with nothing in flight whose bucket would be full again: remembering them changes nothing.
func (z *zone) sweep(now time.Time, r rule) {
	z.lastSweep = now
	for key, c := range z.clients {
		full := r.perSecond <= 0 || c.tokens+now.Sub(c.last).Seconds()*r.perSecond >= float64(r.burst)
		if c.inFlight == 0 && full {
			delete(z.clients, key)
		}
	}
}
