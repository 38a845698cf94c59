package wizard

import (
	"fmt"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"

	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/render"
)

// reviewScreen plans with the person's choices, runs the preflight checks again and shows the Plan
// the install will have to match; s saves the choices as a config file.
type reviewScreen struct {
	s  session
	pg pager
	// req is the check running (nil when none is).
	req *request
	res *engine.CheckResult
	err error
	// values are the value lines per release step (computed once per check).
	values map[string][]string
	notice string
}

func newReviewScreen(s session) *reviewScreen { return &reviewScreen{s: s} }

func (r *reviewScreen) step() step    { return stepReview }
func (r *reviewScreen) pager() *pager { return &r.pg }

// session is the screen's with the Plan reviewed so far.
func (r *reviewScreen) session() session {
	s := r.s
	s.review = r.res
	return s
}

func (r *reviewScreen) help() bindings {
	k := r.s.keys
	return bindings{hk("enter", "install"), k.Back, k.Save, k.Down, k.Up, k.PageDown, k.PageUp, k.Quit, k.Help}
}

func (r *reviewScreen) status() string {
	if r.req == nil && r.blocked() != "" {
		return r.s.st.fail.Render(markFail) + " blocked: " + r.blocked() + " (details above; esc changes your choices)"
	}
	return r.notice
}

// Init plans with the choices and runs the preflight checks.
func (r *reviewScreen) Init() tea.Cmd {
	r.req, r.res, r.err = &request{}, nil, nil
	return checkCmd(r.s, r.req, r.s.opts)
}

func (r *reviewScreen) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case checkedMsg:
		if msg.req == r.req {
			r.req, r.res, r.err = nil, msg.res, msg.err
			r.values = reviewValues(msg.res)
		}
	case tea.KeyPressMsg:
		return r.key(msg)
	}
	return nil
}

func (r *reviewScreen) key(msg tea.KeyPressMsg) tea.Cmd {
	k := r.s.keys
	switch {
	case key.Matches(msg, k.Quit):
		return interrupt
	case key.Matches(msg, k.Back):
		return back()
	case key.Matches(msg, k.Save):
		path := r.s.cfg.SavePath
		if err := SaveConfig(path, r.s.opts, r.s.cfg.Namespace, r.s.kubeContext); err != nil {
			r.notice = markFail + " " + err.Error()
			return nil
		}
		r.s.saved = path
		r.notice = markOK + " saved " + path + " (gpuctl install --config FILE replays it)"
	case key.Matches(msg, k.Next):
		if r.blocked() != "" {
			return nil
		}
		r.notice = ""
		return forward(newInstallScreen(r.session()))
	default:
		r.pg.key(r.s.env, msg)
	}
	return nil
}

// blocked says why the reviewed plan cannot be installed ("" when it can).
func (r *reviewScreen) blocked() string {
	switch {
	case r.req != nil:
		return "checking"
	case r.res == nil || r.res.Plan == nil:
		if r.err != nil {
			return r.err.Error()
		}
		return "no plan"
	case r.res.Report.Failed:
		return "failed: " + strings.Join(r.res.Report.IDs("fail"), ", ")
	case r.err != nil:
		return r.err.Error()
	}
	return ""
}

// reviewValues are the value lines of each release of the reviewed Plan.
func reviewValues(res *engine.CheckResult) map[string][]string {
	out := map[string][]string{}
	if res == nil || res.Plan == nil {
		return out
	}
	for _, s := range res.Plan.Steps {
		if s.Release == nil {
			continue
		}
		// A chart that cannot be loaded (a fake's) has no defaults to compare with.
		defaults, _ := render.ChartDefaults(s.Release.Chart, s.Release.AppVersion)
		out[s.ID] = valueLines(s.Release, defaults)
	}
	return out
}

func (r *reviewScreen) View() string {
	e := r.s.env
	b := &strings.Builder{}
	if r.req != nil {
		b.WriteString(e.spin.View() + " Planning with your choices and running the preflight checks again…\n")
		return b.String()
	}
	if r.res == nil || r.res.Plan == nil {
		b.WriteString(e.st.fail.Render(markFail) + " gpuctl cannot plan this install\n")
		if r.err != nil {
			e.para(b, "  ", r.err.Error())
		}
		if r.res != nil {
			e.reportLines(b, r.res.Report, false)
		}
		b.WriteString("\nesc goes back to change your choices.\n")
		return b.String()
	}
	r.planLines(b, r.res.Plan)
	b.WriteString("\n")
	e.reportLines(b, r.res.Report, false)
	b.WriteString("\n")
	if why := r.blocked(); why != "" {
		e.para(b, "", e.st.fail.Render(markFail)+" A failed check blocks the install ("+why+"): esc to change your choices. Nothing was changed.")
	} else {
		b.WriteString(e.st.em.Render("enter") + ": install · " + e.st.em.Render("s") + ": save these choices for CI\n")
	}
	return b.String()
}

// planLines are the Plan: profile and namespace, its steps, the nodes to taint and the values of
// each release where they differ from the chart.
func (r *reviewScreen) planLines(b *strings.Builder, p *plan.Plan) {
	e := r.s.env
	fmt.Fprintf(b, "%s %s (%s)\n", e.st.heading.Render("Profile  "), e.st.value.Render(p.Profile), p.ProfileWhy)
	fmt.Fprintf(b, "%s %s · context %s · timeout %s\n", e.st.heading.Render("Namespace"), p.Namespace, r.s.kubeContext, p.Timeout)
	for _, w := range p.Warnings {
		e.para(b, "", e.st.warn.Render(markWarn)+" "+w)
	}
	b.WriteString("\n" + e.st.heading.Render("Steps") + "\n")
	for i, s := range p.Steps {
		line := fmt.Sprintf("%2d. %s", i+1, s.Title)
		if s.Skip != "" {
			line = e.st.dim.Render(line + " (skipped: " + s.Skip + ")")
		}
		b.WriteString(line + "\n")
	}
	if t := taintStep(p); t != nil {
		b.WriteString("\n" + e.st.heading.Render("Nodes to taint") + fmt.Sprintf(" with %s=%s:%s\n", t.Taint.Key, t.Taint.Value, t.Taint.Effect))
		nodes := t.Taint.Nodes
		if len(nodes) == 0 {
			nodes = p.GPUNodes
		}
		if len(nodes) == 0 {
			b.WriteString("  the GPU nodes NFD finds\n")
		} else {
			e.para(b, "  ", strings.Join(nodes, ", "))
		}
	}
	if len(p.Drivers) > 0 {
		b.WriteString("\n" + e.st.heading.Render("Drivers") + " (--precompiled auto)\n")
		for _, d := range p.Drivers {
			what := "compiled on the node, " + d.Driver + ": " + d.Why
			if d.Precompiled {
				what = "precompiled, " + d.Driver + ": " + d.Image
			}
			e.para(b, "  ", d.Node+" ("+d.Kernel+"): "+what)
		}
	}
	for _, s := range p.Steps {
		if s.Release == nil || s.Skip != "" {
			continue
		}
		fmt.Fprintf(b, "\n%s %s %s (chart %s %s), where it differs from the chart:\n", e.st.heading.Render("Values of"), s.Release.Name,
			e.st.dim.Render("in "+s.Release.Namespace), s.Release.Chart, s.Release.ChartVersion)
		for _, l := range r.values[s.ID] {
			b.WriteString("  " + l + "\n")
		}
	}
}

func taintStep(p *plan.Plan) *plan.Step {
	for i := range p.Steps {
		if s := &p.Steps[i]; s.Kind == plan.KindTaint && s.Skip == "" && s.Taint != nil {
			return s
		}
	}
	return nil
}
