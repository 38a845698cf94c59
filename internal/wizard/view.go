package wizard

import (
	"fmt"
	"sort"
	"strings"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
	"sigs.k8s.io/yaml"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/event"
	"github.com/gpuctl/gpuctl/internal/plan"
	"github.com/gpuctl/gpuctl/internal/preflight"
	"github.com/gpuctl/gpuctl/internal/ui"
)

// View draws the current screen in the alternate screen buffer.
func (m *Model) View() tea.View {
	v := tea.NewView(m.Render())
	v.AltScreen = true
	v.WindowTitle = "gpuctl wizard"
	return v
}

// Render is the screen as text: a header naming the steps, the body (scrolled to fit), a notice line
// and the keys. Tests compare it with golden files.
func (m *Model) Render() string {
	if m.done {
		return ""
	}
	var body string
	var keys bindings
	k := m.keys
	switch m.screen {
	case screenContext:
		body, keys = m.contextView(), bindings{k.Up, k.Down, k.Next, k.Quit}
	case screenDetect:
		body = m.detectView()
		keys = bindings{k.Next, k.Back, k.Recheck, k.Down, k.Up, k.PageDown, k.PageUp, k.Quit}
	case screenChoices:
		body = m.choicesView()
		if m.picker != nil {
			keys = bindings{hk("↑/↓", "move"), hk("enter", "choose"), hk("←/→", "folder up/in"), hk("esc", "cancel")}
		} else if m.typing() {
			keys = bindings{hk("↑/↓/tab", "move"), hk("type", "edit"), hk("ctrl+o", "browse"), hk("enter", "review"), hk("esc", "back"), hk("ctrl+c", "quit")}
		} else {
			keys = bindings{hk("↑/↓", "move"), hk("←/→", "change"), hk("enter", "review"), hk("esc", "back"), k.Quit}
		}
	case screenReview:
		body = m.reviewView()
		keys = bindings{hk("enter", "install"), k.Back, k.Save, k.Down, k.Up, k.PageDown, k.PageUp, k.Quit}
	case screenInstall:
		body = m.installView()
		switch {
		case m.asking:
			keys = bindings{hk("y", "stop the install"), hk("n/esc", "keep going")}
		case m.finished && !m.outcome.Confirmed:
			keys = bindings{hk("esc", "back to review"), hk("enter/q", "exit")}
		case m.finished:
			keys = bindings{hk("enter/q", "exit"), k.Down, k.Up}
		default:
			keys = bindings{hk("ctrl+c", "stop…"), k.Down, k.Up}
		}
	}
	if m.picker == nil && m.screen != screenInstall {
		keys = append(keys, k.Help)
	}
	header := m.header()
	helpView := m.help.View(keys)
	footer := []string{}
	if status := m.status(); status != "" {
		footer = append(footer, m.wrap(status)...)
	}
	footer = append(footer, strings.Split(helpView, "\n")...)
	avail := m.height - 2 - 1 - len(footer)
	lines := strings.Split(strings.TrimRight(body, "\n"), "\n")
	maxScroll := max(len(lines)-avail, 0)
	if m.scroll > maxScroll {
		m.scroll = maxScroll
	}
	shown := lines[m.scroll:min(m.scroll+avail, len(lines))]
	out := []string{ansi.Truncate(header, m.width, "…"), m.st.rule.Render(strings.Repeat("─", m.width))}
	for _, l := range shown {
		out = append(out, ansi.Truncate(l, m.width, "…"))
	}
	for i := len(shown); i < avail; i++ {
		out = append(out, "")
	}
	rule := strings.Repeat("─", m.width)
	if below := len(lines) - m.scroll - len(shown); below > 0 || m.scroll > 0 {
		more := fmt.Sprintf("── %d above · %d below (↑/↓ pgup/pgdn) ", m.scroll, below)
		rule = more + strings.Repeat("─", max(m.width-ansi.StringWidth(more), 0))
	}
	out = append(out, m.st.rule.Render(rule))
	for _, l := range footer {
		out = append(out, ansi.Truncate(l, m.width, "…"))
	}
	return strings.Join(out, "\n")
}

// status is the line above the keys: why the way forward is blocked, or the last notice.
func (m *Model) status() string {
	switch {
	case m.screen == screenDetect && !m.detecting && m.detectBlocked() != "":
		return m.st.fail.Render(markFail) + " blocked: " + m.detectBlocked() + " (details above; r detects again)"
	case m.screen == screenReview && !m.reviewing && m.reviewBlocked() != "":
		return m.st.fail.Render(markFail) + " blocked: " + m.reviewBlocked() + " (details above; esc changes your choices)"
	}
	return m.notice
}

func (m *Model) bodyHeight() int { return max(m.height-5, 3) }

func (m *Model) header() string {
	parts := make([]string, len(screenNames))
	for i, n := range screenNames {
		label := fmt.Sprintf("%d %s", i+1, n)
		if screen(i) == m.screen {
			label = m.st.selected.Render("[" + label + "]")
		} else {
			label = m.st.dim.Render(label)
		}
		parts[i] = label
	}
	return m.st.title.Render("gpuctl wizard") + "  " + strings.Join(parts, m.st.dim.Render(" › "))
}

// wrap breaks text to the screen's width.
func (m *Model) wrap(text string) []string {
	return strings.Split(ansi.Wrap(text, m.width, " "), "\n")
}

func (m *Model) para(b *strings.Builder, indent, text string) {
	for _, l := range strings.Split(ansi.Wrap(text, max(m.width-len(indent), 20), " ,"), "\n") {
		b.WriteString(indent + l + "\n")
	}
}

func (m *Model) contextView() string {
	b := &strings.Builder{}
	b.WriteString(m.st.heading.Render("Which cluster?") + "\n")
	m.para(b, "", "gpuctl installs into the cluster of the kube context you pick. Nothing changes until you confirm the plan.")
	b.WriteString("\n")
	if m.ctxErr != nil {
		m.para(b, "", m.st.fail.Render(markFail)+" cannot read the kubeconfig: "+m.ctxErr.Error())
		return b.String()
	}
	if m.contexts == nil {
		b.WriteString(m.spin.View() + " reading the kubeconfig…\n")
		return b.String()
	}
	if len(m.contexts) == 0 {
		m.para(b, "", m.st.fail.Render(markFail)+" the kubeconfig has no contexts: set KUBECONFIG or pass --kubeconfig")
		return b.String()
	}
	rows := [][]string{{"  CONTEXT", "CLUSTER", "USER", "NAMESPACE"}}
	for i, c := range m.contexts {
		cur := "  "
		if i == m.ctxSel {
			cur = "› "
		}
		rows = append(rows, []string{cur + c.Name, c.Cluster, c.User, c.Namespace})
	}
	for i, l := range table(rows) {
		if i == m.ctxSel+1 {
			l = m.st.selected.Render(l)
		} else if i == 0 {
			l = m.st.dim.Render(l)
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

// table aligns rows in columns two spaces apart.
func table(rows [][]string) []string {
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], ansi.StringWidth(c))
		}
	}
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-ansi.StringWidth(c)+2))
			}
		}
		out = append(out, strings.TrimRight(b.String(), " "))
	}
	return out
}

func (m *Model) mark(s preflight.Status) string {
	switch s {
	case preflight.StatusPass:
		return m.st.ok.Render(markOK)
	case preflight.StatusWarn:
		return m.st.warn.Render(markWarn)
	case preflight.StatusFail:
		return m.st.fail.Render(markFail)
	}
	return m.st.dim.Render(markSkip)
}

func (m *Model) detectView() string {
	b := &strings.Builder{}
	if m.detecting {
		b.WriteString(m.spin.View() + " Detecting " + m.kubeContext + ": distribution, GPU nodes, what is installed, preflight checks…\n")
		return b.String()
	}
	if m.check == nil || m.check.Detection == nil {
		b.WriteString(m.st.fail.Render(markFail) + " gpuctl cannot read the cluster of context " + m.kubeContext + "\n")
		if m.checkErr != nil {
			m.para(b, "  ", m.checkErr.Error())
		}
		if m.check != nil {
			m.reportLines(b, m.check.Report, true)
		}
		b.WriteString("\nFix it and press r to detect again, or esc to pick another context.\n")
		return b.String()
	}
	d := m.check.Detection
	dist := d.Distribution
	fmt.Fprintf(b, "%s %s %s — %s (confidence %d%%)\n", m.st.heading.Render("Distribution"), m.st.value.Render(dist.Name), dist.Version, dist.Description, dist.Confidence)
	ev := dist.Evidence
	sort.SliceStable(ev, func(i, j int) bool { return ev[i].Weight > ev[j].Weight })
	for i, e := range ev {
		if i == 3 {
			fmt.Fprintf(b, "  … and %d more signals (gpuctl detect shows them all)\n", len(ev)-3)
			break
		}
		fmt.Fprintf(b, "  %s %s (%s)\n", e.Signal, e.Value, e.Source)
	}
	fmt.Fprintf(b, "%s %s · %d nodes: %d control plane, %d workers, %d with GPUs\n", m.st.heading.Render("Kubernetes  "),
		d.KubernetesVersion, d.Nodes.Total, d.Nodes.ControlPlane, d.Nodes.Workers, d.Nodes.GPU)
	if dist.Fallback {
		m.para(b, "", m.st.warn.Render(markWarn)+" no distribution's signals were strong enough: upstream defaults (kubeadm) are a guess; pick the profile on the next screen")
	}
	for _, w := range d.Warnings {
		m.para(b, "", m.st.warn.Render(markWarn)+" "+w)
	}
	b.WriteString("\n" + m.st.heading.Render("GPU nodes") + "\n")
	if len(d.GPUNodes) == 0 {
		b.WriteString("  none found yet (NFD will look for them)\n")
	} else {
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
				l = m.st.dim.Render(l)
			}
			b.WriteString(l + "\n")
		}
	}
	b.WriteString("\n" + m.st.heading.Render("Already installed") + "\n")
	for _, l := range existingLines(d.Existing) {
		b.WriteString("  " + l + "\n")
	}
	b.WriteString("\n")
	m.reportLines(b, m.check.Report, false)
	b.WriteString("\n")
	if why := m.detectBlocked(); why != "" {
		m.para(b, "", m.st.fail.Render(markFail)+" A failed check blocks the install ("+why+"): fix it and press r to detect again. Nothing was changed.")
	} else {
		b.WriteString(m.st.em.Render("enter") + ": make your choices\n")
	}
	return b.String()
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

// reportLines prints the preflight results: a summary line, then each warning and failure with its
// hint (passes only count).
func (m *Model) reportLines(b *strings.Builder, r preflight.Report, all bool) {
	counts := map[preflight.Status]int{}
	for _, res := range r.Results {
		counts[res.Status]++
	}
	fmt.Fprintf(b, "%s %d passed, %s, %d failed, %d skipped\n", m.st.heading.Render("Preflight"),
		counts[preflight.StatusPass], ui.Plural(counts[preflight.StatusWarn], "warning"), counts[preflight.StatusFail], counts[preflight.StatusSkip])
	for _, res := range r.Results {
		if res.Status != preflight.StatusWarn && res.Status != preflight.StatusFail && !(all && res.Status != preflight.StatusPass) {
			continue
		}
		fix := ""
		if res.Status == preflight.StatusFail && choiceFixable(res.ID, res.Message) {
			fix = " (a choice on the next screen decides this)"
		}
		fmt.Fprintf(b, "  %s %s [%s]%s\n", m.mark(res.Status), res.Description, res.ID, fix)
		for _, l := range strings.Split(strings.TrimRight(res.Message, "\n"), "\n") {
			if l != "" {
				m.para(b, "      ", l)
			}
		}
		if res.Hint != "" {
			m.para(b, "      ", "hint: "+res.Hint)
		}
	}
}

func (m *Model) choicesView() string {
	b := &strings.Builder{}
	if m.picker != nil {
		f := m.fields[m.fieldSel]
		b.WriteString(m.st.heading.Render("Choose the "+f.label+" file") + "\n")
		b.WriteString(m.st.dim.Render(m.picker.CurrentDirectory) + "\n\n")
		b.WriteString(m.picker.View())
		return b.String()
	}
	b.WriteString(m.st.heading.Render("Your choices") + m.st.dim.Render(" — the detected answers are preselected") + "\n\n")
	for i := range m.fields {
		f := &m.fields[i]
		cur := "  "
		label := fmt.Sprintf("%-22s", f.label)
		if i == m.fieldSel {
			cur = m.st.cursor.Render("› ")
			label = m.st.selected.Render(label)
		}
		var val string
		switch f.kind {
		case kindSelect:
			var opts []string
			for j, o := range f.options {
				if j == f.sel {
					opts = append(opts, m.st.value.Render("‹ "+o.label+" ›"))
				}
			}
			val = strings.Join(opts, " ")
			if len(f.options) > 1 {
				val += m.st.dim.Render(fmt.Sprintf(" %d/%d", f.sel+1, len(f.options)))
			}
		default:
			if i == m.fieldSel {
				val = f.input.View()
			} else if f.kind == kindSecret && f.input.Value() != "" {
				val = strings.Repeat("•", 8)
			} else {
				val = ui.OrNone(f.input.Value(), "-")
			}
		}
		b.WriteString(cur + label + val + "\n")
		b.WriteString("    " + m.st.dim.Render(f.help) + "\n")
	}
	return b.String()
}

func (m *Model) reviewView() string {
	b := &strings.Builder{}
	if m.reviewing {
		b.WriteString(m.spin.View() + " Planning with your choices and running the preflight checks again…\n")
		return b.String()
	}
	if m.review == nil || m.review.Plan == nil {
		b.WriteString(m.st.fail.Render(markFail) + " gpuctl cannot plan this install\n")
		if m.reviewErr != nil {
			m.para(b, "  ", m.reviewErr.Error())
		}
		if m.review != nil {
			m.reportLines(b, m.review.Report, false)
		}
		b.WriteString("\nesc goes back to change your choices.\n")
		return b.String()
	}
	p := m.review.Plan
	fmt.Fprintf(b, "%s %s (%s)\n", m.st.heading.Render("Profile  "), m.st.value.Render(p.Profile), p.ProfileWhy)
	fmt.Fprintf(b, "%s %s · context %s · timeout %s\n", m.st.heading.Render("Namespace"), p.Namespace, m.kubeContext, p.Timeout)
	for _, w := range p.Warnings {
		m.para(b, "", m.st.warn.Render(markWarn)+" "+w)
	}
	b.WriteString("\n" + m.st.heading.Render("Steps") + "\n")
	for i, s := range p.Steps {
		line := fmt.Sprintf("%2d. %s", i+1, s.Title)
		if s.Skip != "" {
			line = m.st.dim.Render(line + " (skipped: " + s.Skip + ")")
		}
		b.WriteString(line + "\n")
	}
	if t := taintStep(p); t != nil {
		b.WriteString("\n" + m.st.heading.Render("Nodes to taint") + fmt.Sprintf(" with %s=%s:%s\n", t.Taint.Key, t.Taint.Value, t.Taint.Effect))
		nodes := t.Taint.Nodes
		if len(nodes) == 0 {
			nodes = p.GPUNodes
		}
		if len(nodes) == 0 {
			b.WriteString("  the GPU nodes NFD finds\n")
		} else {
			m.para(b, "  ", strings.Join(nodes, ", "))
		}
	}
	for _, s := range p.Steps {
		if s.Release == nil || s.Skip != "" {
			continue
		}
		fmt.Fprintf(b, "\n%s %s %s (chart %s %s), where it differs from the chart:\n", m.st.heading.Render("Values of"), s.Release.Name,
			m.st.dim.Render("in "+s.Release.Namespace), s.Release.Chart, s.Release.ChartVersion)
		for _, l := range m.values[s.ID] {
			b.WriteString("  " + l + "\n")
		}
	}
	b.WriteString("\n")
	m.reportLines(b, m.review.Report, false)
	b.WriteString("\n")
	if why := m.reviewBlocked(); why != "" {
		m.para(b, "", m.st.fail.Render(markFail)+" A failed check blocks the install ("+why+"): esc to change your choices. Nothing was changed.")
	} else {
		b.WriteString(m.st.em.Render("enter") + ": install · " + m.st.em.Render("s") + ": save these choices for CI\n")
	}
	return b.String()
}

func taintStep(p *plan.Plan) *plan.Step {
	for i := range p.Steps {
		if s := &p.Steps[i]; s.Kind == plan.KindTaint && s.Skip == "" && s.Taint != nil {
			return s
		}
	}
	return nil
}

// valueLines flattens a release's values to key=value lines that differ from the chart's defaults,
// each with the layer it comes from (the last layer that sets a key wins, as in the Plan), and
// counts the values that only repeat a default.
func valueLines(r *plan.Release, defaults map[string]any) []string {
	source := map[string]string{}
	for _, l := range r.Layers {
		for k := range flatten("", l.Values) {
			source[k] = l.Source
		}
	}
	flat, def := flatten("", r.Values), flatten("", defaults)
	keys := make([]string, 0, len(flat))
	same := 0
	for k, v := range flat {
		if d, ok := def[k]; ok && d == v {
			same++
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	rows := make([][]string, 0, len(keys))
	for _, k := range keys {
		rows = append(rows, []string{k + "=" + flat[k], "(" + ui.OrNone(source[k], "-") + ")"})
	}
	out := table(rows)
	if len(rows) == 0 {
		out = []string{"(none: the chart's defaults)"}
	}
	if same > 0 {
		out = append(out, fmt.Sprintf("(and %s set to the chart's default)", ui.Plural(same, "value")))
	}
	return out
}

// flatten maps nested values to dotted keys; lists and scalars are leaves, written as compact YAML.
func flatten(prefix string, v map[string]any) map[string]string {
	out := map[string]string{}
	for k, x := range v {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		if sub, ok := x.(map[string]any); ok && len(sub) > 0 {
			for kk, vv := range flatten(key, sub) {
				out[kk] = vv
			}
			continue
		}
		out[key] = compact(x)
	}
	return out
}

func compact(x any) string {
	switch x.(type) {
	case string:
		return fmt.Sprint(x)
	}
	b, err := yaml.Marshal(x)
	if err != nil {
		return fmt.Sprint(x)
	}
	s := strings.TrimSpace(string(b))
	if strings.Contains(s, "\n") {
		j, err := yaml.YAMLToJSON(b)
		if err == nil {
			return string(j)
		}
	}
	return s
}

func (m *Model) installView() string {
	b := &strings.Builder{}
	title := "Installing"
	switch {
	case m.finished && m.outcome.Err == nil:
		title = m.st.ok.Render(markOK) + " Installed"
	case m.finished && m.outcome.Confirmed:
		title = m.st.fail.Render(markFail) + " The install stopped"
	case m.finished:
		title = m.st.fail.Render(markFail) + " Nothing was installed"
	case m.stopping:
		title = "Stopping at the next safe point…"
	case !m.outcome.Confirmed:
		title = m.spin.View() + " Taking the install lock, detecting again, running the preflight checks…"
	}
	b.WriteString(m.st.heading.Render(title) + m.st.dim.Render(" · context "+m.kubeContext) + "\n")
	for i := range m.steps {
		s := &m.steps[i]
		var mk string
		switch {
		case s.interrupted():
			mk = m.st.warn.Render(markStopped)
		case s.state == event.StepSucceeded:
			mk = m.st.ok.Render(markOK)
		case s.state == event.StepSkipped:
			mk = m.st.dim.Render(markSkip)
		case s.state == event.StepFailed:
			mk = m.st.fail.Render(markFail)
		case s.state == event.StepStarted:
			mk = m.spin.View()
		default:
			mk = m.st.dim.Render(markPending)
		}
		line := fmt.Sprintf("%s %s", mk, s.title)
		if d := m.duration(s); d != "" {
			line += m.st.dim.Render(" " + d)
		}
		msg := s.message
		if s.state == "" && s.skip != "" {
			msg = "will skip: " + s.skip
		}
		if msg != "" {
			line += m.st.dim.Render(" · " + msg)
		}
		b.WriteString(line + "\n")
		if s.state == event.StepStarted && (s.kind == plan.KindWaitValidators || s.kind == plan.KindWaitAllocatable) && s.total > 0 {
			m.nodeLines(b, s)
		}
	}
	if m.asking {
		b.WriteString("\n")
		m.para(b, "", m.st.warn.Render(markWarn)+" Stop the install? The steps that finished stay done, and gpuctl install resumes from there. [y/N]")
	}
	for i := range m.steps {
		s := &m.steps[i]
		if s.state != event.StepFailed || s.interrupted() {
			continue
		}
		b.WriteString("\n" + m.st.fail.Render(markFail+" "+s.title+": ") + "\n")
		if s.err != "" {
			m.para(b, "    ", s.err)
		}
		for _, l := range strings.Split(strings.TrimRight(s.detail, "\n"), "\n") {
			if l != "" {
				b.WriteString("    " + l + "\n")
			}
		}
		if s.hint != "" {
			m.para(b, "    ", "hint: "+s.hint)
		}
	}
	if len(m.warnings) > 0 {
		b.WriteString("\n")
		for _, w := range m.warnings {
			m.para(b, "", m.st.warn.Render(markWarn)+" "+w)
		}
	}
	if m.finished && m.outcome.Err == nil && m.outcome.Result != nil {
		b.WriteString("\n" + m.summary())
		m.outcomeNextSteps(b)
	} else if m.finished && m.outcome.Confirmed {
		b.WriteString("\n")
		m.para(b, "", "gpuctl install resumes where this stopped: "+m.replay())
	}
	return b.String()
}

func (m *Model) outcomeNextSteps(b *strings.Builder) {
	if m.saved == "" {
		m.para(b, "", m.st.dim.Render("(Choices not saved: the command above replays them.)"))
	}
}

// nodeLines is the per-GPU-node view of a node wait: each node validated or still waited on.
func (m *Model) nodeLines(b *strings.Builder, s *stepState) {
	names, pending := m.nodeStates(s)
	const most = 8
	for i, n := range names {
		if i == most {
			fmt.Fprintf(b, "      … and %d more\n", len(names)-most)
			break
		}
		if pending[n] {
			fmt.Fprintf(b, "      %s %s %s\n", m.spin.View(), n, m.st.dim.Render("waiting"))
		} else {
			fmt.Fprintf(b, "      %s %s %s\n", m.st.ok.Render(markOK), n, m.st.dim.Render("done"))
		}
	}
	if extra := s.total - len(names); extra > 0 {
		fmt.Fprintf(b, "      %d more GPU nodes NFD found\n", extra)
	}
}
