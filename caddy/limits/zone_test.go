package limits

import (
	"testing"
	"time"
)

func TestRateAllowsBurstThenOneAtItsPace(t *testing.T) {
	z := &zone{clients: map[string]*client{}}
	r := rule{perSecond: 1, burst: 3}
	now := time.Unix(1000, 0)
	for i := 0; i < 3; i++ {
		if ok, _ := z.admit("k", now, r); !ok {
			t.Fatalf("request %d of the burst refused", i+1)
		}
		z.done("k")
	}
	if ok, wait := z.admit("k", now, r); ok || wait != 1 {
		t.Fatalf("past the burst: ok=%v wait=%d, want refused with wait 1", ok, wait)
	}
	if ok, _ := z.admit("other", now, r); !ok {
		t.Fatal("another key shares the first one's bucket")
	}
	if ok, _ := z.admit("k", now.Add(1100*time.Millisecond), r); !ok {
		t.Fatal("a second later one more is allowed")
	}
}

func TestWaitIsTheTimeUntilOneToken(t *testing.T) {
	z := &zone{clients: map[string]*client{}}
	r := rule{perSecond: 0.1, burst: 1} // 6 a minute
	now := time.Unix(1000, 0)
	z.admit("k", now, r)
	if ok, wait := z.admit("k", now.Add(2*time.Second), r); ok || wait != 8 {
		t.Fatalf("ok=%v wait=%d, want refused with wait 8", ok, wait)
	}
}

func TestInFlightBoundCountsUntilDone(t *testing.T) {
	z := &zone{clients: map[string]*client{}}
	r := rule{maxInFlight: 2}
	now := time.Unix(1000, 0)
	z.admit("k", now, r)
	z.admit("k", now, r)
	if ok, wait := z.admit("k", now, r); ok || wait != 0 {
		t.Fatalf("a third in flight: ok=%v wait=%d, want refused with wait 0", ok, wait)
	}
	z.done("k")
	if ok, _ := z.admit("k", now, r); !ok {
		t.Fatal("one finished: the next is admitted")
	}
}

func TestRefusalTakesNoToken(t *testing.T) {
	z := &zone{clients: map[string]*client{}}
	r := rule{perSecond: 1, burst: 2, maxInFlight: 1}
	now := time.Unix(1000, 0)
	z.admit("k", now, r)
	if ok, _ := z.admit("k", now, r); ok {
		t.Fatal("second in flight admitted")
	}
	z.done("k")
	if ok, _ := z.admit("k", now, r); !ok {
		t.Fatal("the in-flight refusal spent a token")
	}
}

func TestSweepForgetsOnlyIdleFullClients(t *testing.T) {
	z := &zone{clients: map[string]*client{}}
	r := rule{perSecond: 1, burst: 5, maxInFlight: 10}
	now := time.Unix(1000, 0)
	z.admit("busy", now, r)
	z.admit("idle", now, r)
	z.done("idle")
	z.sweep(now.Add(10*time.Second), r)
	if _, ok := z.clients["idle"]; ok {
		t.Fatal("an idle client with a full bucket is kept")
	}
	if _, ok := z.clients["busy"]; !ok {
		t.Fatal("a client with a request in flight is forgotten")
	}
}

func TestASweepNeverFreesTheClientBeingCounted(t *testing.T) {
	z := &zone{clients: map[string]*client{}}
	r := rule{perSecond: 0.1, burst: 1}
	now := time.Unix(1000, 0)
	z.admit("k", now, r)
	z.done("k")
	later := now.Add(2 * time.Minute) // a sweep is due, and k's bucket is full again
	if ok, _ := z.admit("k", later, r); !ok {
		t.Fatal("a full bucket refused")
	}
	z.done("k")
	if ok, _ := z.admit("k", later, r); ok {
		t.Fatal("the burst of 1 let a second request through: the sweep dropped the client it was counting")
	}
}

func TestZonesOutliveAReload(t *testing.T) {
	a, b := zoneFor("test-reload"), zoneFor("test-reload")
	if a != b {
		t.Fatal("two handlers of one zone name do not share its counters")
	}
}

func TestAFullZoneSweepsAtMostOnceASecond(t *testing.T) {
	defer func(n int) { maxClients = n }(maxClients)
	maxClients = 3
	z := &zone{clients: map[string]*client{}}
	r := rule{maxInFlight: 1}
	now := time.Unix(1000, 0)
	for _, k := range []string{"a", "b", "c"} { // in flight: no sweep can free them
		z.admit(k, now, r)
	}
	first := now.Add(2 * time.Minute)
	if ok, _ := z.admit("d", first, r); ok {
		t.Fatal("a fourth client admitted to a zone of three busy ones")
	}
	for i := 1; i < 10; i++ { // a flood of new clients within the second
		z.admit("new", first.Add(time.Duration(i)*100*time.Millisecond), r)
	}
	if !z.lastSweep.Equal(first) {
		t.Fatalf("a full zone swept again after %v: each request of a flood would walk every client",
			z.lastSweep.Sub(first))
	}
	z.done("a")
	if ok, _ := z.admit("d", first.Add(time.Second), r); !ok {
		t.Fatal("a second later the sweep frees the idle client, and a new one is admitted")
	}
}
