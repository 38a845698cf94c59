package wizard

import (
	"fmt"
	"sort"
	"strings"

	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/engine"
	"github.com/gpuctl/gpuctl/internal/profile"
	"github.com/gpuctl/gpuctl/internal/ui"
)

// detectScreen shows what detection and the preflight checks found in the chosen context.
type detectScreen struct {
	s  session
	pg pager
	// req is the detection running (nil when none is).
	req   *request
	check *engine.CheckResult
	err   error
}

func newDetectScreen(s session) *detectScreen { return &detectScreen{s: s} }

func (d *detectScreen) step() step       { return stepDetect }
func (d *detectScreen) session() session { return d.s }
func (d *detectScreen) pager() *pager    { return &d.pg }

func (d *detectScreen) help() bindings {
	k := d.s.keys
	return bindings{k.Next, k.Back, k.Recheck, k.Down, k.Up, k.PageDown, k.PageUp, k.Quit, k.Help}
}

func (d *detectScreen) status() string {
	if d.req == nil && d.blocked() != "" {
		return d.s.st.fail.Render(markFail) + " blocked: " + d.blocked() + " (details above; r detects again)"
	}
	return ""
}

// Init detects.
func (d *detectScreen) Init() tea.Cmd {
	d.req, d.check, d.err = &request{}, nil, nil
	return checkCmd(d.s, d.req, d.s.cfg.Base)
}

func (d *detectScreen) Update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case checkedMsg:
		if msg.req == d.req {
			d.req, d.check, d.err = nil, msg.res, msg.err
		}
	case tea.KeyPressMsg:
		return d.key(msg)
	}
	return nil
}

func (d *detectScreen) key(msg tea.KeyPressMsg) tea.Cmd {
	k := d.s.keys
	switch {
	case key.Matches(msg, k.Quit):
		return interrupt
	case key.Matches(msg, k.Back):
		return back()
	case key.Matches(msg, k.Recheck):
		if d.req == nil {
			d.pg.offset = 0
			return d.Init()
		}
	case key.Matches(msg, k.Next):
		if d.blocked() != "" {
			return nil
		}
		next := d.s
		next.check, next.detected = d.check, detectedProfile(d.check)
		return forward(newChoicesScreen(next))
	default:
		d.pg.key(d.s.env, msg)
	}
	return nil
}

// blocked says why the wizard cannot go on from detection ("" when it can).
func (d *detectScreen) blocked() string {
	if d.req != nil {
		return "detecting"
	}
	if d.check == nil {
		if d.err != nil {
			return d.err.Error()
		}
		return "nothing detected"
	}
	if d.check.Detection == nil {
		return "gpuctl cannot read this cluster"
	}
	var blocking []string
	for _, r := range d.check.Report.Results {
		if r.Status == "fail" && !choiceFixable(r.ID, r.Message) {
			blocking = append(blocking, r.ID)
		}
	}
	if len(blocking) > 0 {
		return "failed: " + strings.Join(blocking, ", ")
	}
	return ""
}

// detectedProfile is the profile gpuctl chooses by itself: the Plan's, or the default one.
func detectedProfile(c *engine.CheckResult) string {
	if c != nil && c.Plan != nil && c.Plan.Profile != "" {
		return c.Plan.Profile
	}
	if c != nil && c.Detection != nil {
		if name, exact := profile.ForDistribution(c.Detection.Distribution.Name); exact {
			return name
		}
	}
	return profile.Default
}

func hostDriver(c *engine.CheckResult) bool {
	if c == nil || c.Detection == nil {
		return false
	}
	for _, n := range c.Detection.GPUNodes {
		if n.HostDriver != "" {
			return true
		}
	}
	return len(c.Detection.Existing.HostDriverNodes) > 0
}

func (d *detectScreen) View() string {
	e := d.s.env
	b := &strings.Builder{}
	if d.req != nil {
		b.WriteString(e.spin.View() + " Detecting " + d.s.kubeContext + ": distribution, GPU nodes, what is installed, preflight checks…\n")
		return b.String()
	}
	if d.check == nil || d.check.Detection == nil {
		b.WriteString(e.st.fail.Render(markFail) + " gpuctl cannot read the cluster of context " + d.s.kubeContext + "\n")
		if d.err != nil {
			e.para(b, "  ", d.err.Error())
		}
		if d.check != nil {
			e.reportLines(b, d.check.Report, true)
		}
		b.WriteString("\nFix it and press r to detect again, or esc to pick another context.\n")
		return b.String()
	}
	det := d.check.Detection
	distributionLines(e, b, det)
	b.WriteString("\n" + e.st.heading.Render("GPU nodes") + "\n")
	gpuNodeLines(e, b, det)
	b.WriteString("\n" + e.st.heading.Render("Already installed") + "\n")
	for _, l := range existingLines(det.Existing) {
		b.WriteString("  " + l + "\n")
	}
	b.WriteString("\n")
	e.reportLines(b, d.check.Report, false)
	b.WriteString("\n")
	if why := d.blocked(); why != "" {
		e.para(b, "", e.st.fail.Render(markFail)+" A failed check blocks the install ("+why+"): fix it and press r to detect again. Nothing was changed.")
	} else {
		b.WriteString(e.st.em.Render("enter") + ": make your choices\n")
	}
	return b.String()
}

// distributionLines are the distribution with its strongest signals, and the cluster's size.
func distributionLines(e *env, b *strings.Builder, d *detect.Result) {
	dist := d.Distribution
	fmt.Fprintf(b, "%s %s %s — %s (confidence %d%%)\n", e.st.heading.Render("Distribution"), e.st.value.Render(dist.Name), dist.Version, dist.Description, dist.Confidence)
	ev := dist.Evidence
	sort.SliceStable(ev, func(i, j int) bool { return ev[i].Weight > ev[j].Weight })
	for i, s := range ev {
		if i == 3 {
			fmt.Fprintf(b, "  … and %d more signals (gpuctl detect shows them all)\n", len(ev)-3)
			break
		}
		fmt.Fprintf(b, "  %s %s (%s)\n", s.Signal, s.Value, s.Source)
	}
	fmt.Fprintf(b, "%s %s · %d nodes: %d control plane, %d workers, %d with GPUs\n", e.st.heading.Render("Kubernetes  "),
		d.KubernetesVersion, d.Nodes.Total, d.Nodes.ControlPlane, d.Nodes.Workers, d.Nodes.GPU)
	if dist.Fallback {
		e.para(b, "", e.st.warn.Render(markWarn)+" no distribution's signals were strong enough: upstream defaults (kubeadm) are a guess; pick the profile on the next screen")
	}
	for _, w := range d.Warnings {
		e.para(b, "", e.st.warn.Render(markWarn)+" "+w)
	}
}

// gpuNodeLines is the table of GPU nodes.
func gpuNodeLines(e *env, b *strings.Builder, d *detect.Result) {
	if len(d.GPUNodes) == 0 {
		b.WriteString("  none found yet (NFD will look for them)\n")
		return
	}
	osOf := map[string]string{}
	for _, p := range d.Pools {
		osOf[p.Name] = p.OS
	}
	rows := [][]string{{"  NODE", "GPUS", "PRODUCT", "HOST DRIVER", "OS", "POOL"}}
	for _, n := range d.GPUNodes {
		osName := osOf[n.Pool]
		if osName == "" {
			osName = ansi.Truncate(n.OSImage, 16, "…")
		}
		gpus := "?"
		if n.GPUs > 0 {
			gpus = fmt.Sprint(n.GPUs)
		}
		drv := "none"
		if n.HostDriver != "" {
			drv = "yes: " + n.HostDriver
		}
		rows = append(rows, []string{"  " + n.Name, gpus, ui.OrNone(n.Product, "-"), drv, ui.OrNone(osName, "-"), ui.OrNone(n.Pool, "-")})
	}
	for i, l := range table(rows) {
		if i == 0 {
			l = e.st.dim.Render(l)
		}
		b.WriteString(l + "\n")
	}
}

func existingLines(e detect.Existing) []string {
	var out []string
	nfd := "none"
	if e.NFD.Present {
		nfd = "runs in " + strings.Join(e.NFD.Namespaces, ", ")
		if e.NFD.Helm != nil {
			nfd += " (helm release " + e.NFD.Helm.Name + ")"
		}
	}
	out = append(out, "Node Feature Discovery: "+nfd)
	op := "none"
	if e.GPUOperator.Present {
		op = "in " + ui.OrNone(e.GPUOperator.Namespace, "-")
		if e.GPUOperator.Helm != nil {
			op += fmt.Sprintf(" (helm release %s, chart %s)", e.GPUOperator.Helm.Name, e.GPUOperator.Helm.Chart)
		}
	}
	out = append(out, "GPU operator: "+op)
	if len(e.ClusterPolicies) > 0 {
		out = append(out, fmt.Sprintf("ClusterPolicies: %d (active: %s)", len(e.ClusterPolicies), ui.OrNone(e.ActiveClusterPolicy, "-")))
	}
	if len(e.DevicePlugins) > 0 {
		var names []string
		for _, d := range e.DevicePlugins {
			names = append(names, d.Namespace+"/"+d.Name+" ("+d.Provider+")")
		}
		out = append(out, "device plugins: "+strings.Join(names, ", "))
	}
	if e.GKEDriverInstaller != nil {
		out = append(out, "GKE driver installer: "+e.GKEDriverInstaller.Namespace+"/"+e.GKEDriverInstaller.Name)
	}
	return out
}
