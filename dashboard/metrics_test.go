package dashboard_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ahpd/ahpd/dashboard"
)

// TestRefusalsCounted: what the dashboard refuses is counted by why, for
// the metrics: a sign-in with a bad token, one the logins table has no
// room for, a live page past its person's budget.
func TestRefusalsCounted(t *testing.T) {
	m := dashboard.NewMetrics()
	e := newEnv(t, envOptions{maxLogins: 1, livePerPerson: 1, metrics: m})
	if r := e.browser().post("/ui/login", url.Values{"token": {"not-a-token"}}); r.status != http.StatusUnauthorized {
		t.Fatalf("a bad token: %d", r.status)
	}
	mo := e.signIn("mo")
	if r := e.browser().post("/ui/login", url.Values{"token": {e.tokens["gus"]}}); r.status != http.StatusTooManyRequests {
		t.Fatalf("a sign-in past the table: %d", r.status)
	}
	mo.stream(t, "/ui/events")
	if r := mo.get("/ui/events"); r.status != http.StatusTooManyRequests {
		t.Fatalf("a live page past the budget: %d", r.status)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m.Collector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			got[f.GetName()+"/"+mt.GetLabel()[0].GetValue()] = mt.GetCounter().GetValue()
		}
	}
	for _, k := range []string{"token", "logins", "live_pages"} {
		if got["ahpd_dashboard_refused_total/"+k] != 1 {
			t.Errorf("%s refusals counted %v, want 1 (all: %v)", k, got["ahpd_dashboard_refused_total/"+k], got)
		}
	}
}
