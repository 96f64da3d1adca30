package dashboard

import "net/http"

func (d *Dashboard) automationsPage(w http.ResponseWriter, r *http.Request) {
	d.render(w, r, http.StatusOK, "automations", d.pageFor(r, "Automations", "automations", nil))
}
