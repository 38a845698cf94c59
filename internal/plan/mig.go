package plan

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpuctl/gpuctl/internal/detect"
	"github.com/gpuctl/gpuctl/internal/distro"
)

// MIG (--mig): NVIDIA's MIG manager partitions a node's GPUs into the MIG devices of the mig-parted
// config its nvidia.com/mig.config label names, and reports progress in nvidia.com/mig.config.state;
// the ClusterPolicy's mig.strategy says how the device plugin advertises them: single (each GPU's
// devices as nvidia.com/gpu, all of one profile) or mixed (nvidia.com/mig-<profile> per profile)
// (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-operator-mig.html).
const (
	// MIGLabel picks a node's mig-parted config (a key of the operator's default-mig-parted-config).
	MIGLabel = "nvidia.com/mig.config"
	// MIGStateLabel is MIG manager's progress on a node: pending, success or failed.
	MIGStateLabel = "nvidia.com/mig.config.state"
	// MIGSource is the values layer --mig adds to the operator release.
	MIGSource = "--mig"
	// MIGNone is the --mig value that takes gpuctl's MIG choice off (upgrade).
	MIGNone = "none"
	// MIG strategies, as the ClusterPolicy's mig.strategy spells them.
	MIGSingle = "single"
	MIGMixed  = "mixed"
)

// MIGChoice is --mig parsed: a strategy, and the mig-parted config of every GPU node ("" Pool) or of
// one detected pool.
type MIGChoice struct {
	Strategy string      `json:"strategy"`
	Configs  []MIGConfig `json:"configs,omitempty"`
}

// MIGConfig is one pool's mig-parted config ("" Pool: every GPU node).
type MIGConfig struct {
	Pool   string `json:"pool,omitempty"`
	Config string `json:"config"`
}

// migConfigName is what a mig-parted config's name may be: a YAML key of its mig-configs, as NVIDIA
// names them (all-disabled, all-1g.10gb, all-1g.10gb.me, all-balanced).
var migConfigName = regexp.MustCompile(`^[a-z0-9][a-z0-9.+_-]*$`)

// ParseMIG reads --mig values: single or mixed (the strategy, at most once; single, NVIDIA's
// default, when none is given), CONFIG for every GPU node, POOL=CONFIG for one pool (each at most
// once), or "none" alone. It returns nil for "none" and for no values.
func ParseMIG(values []string) (*MIGChoice, error) {
	if len(values) == 0 {
		return nil, nil
	}
	c := &MIGChoice{}
	seen := map[string]bool{}
	for _, v := range values {
		switch {
		case v == MIGNone:
			if len(values) > 1 {
				return nil, fmt.Errorf("%w: --mig none takes gpuctl's MIG choice off: give it alone", ErrInput)
			}
			return nil, nil
		case v == MIGSingle || v == MIGMixed:
			if c.Strategy != "" && c.Strategy != v {
				return nil, fmt.Errorf("%w: --mig %s: the strategy is %s already; a cluster has one mig.strategy", ErrInput, v, c.Strategy)
			}
			c.Strategy = v
			continue
		}
		pool, config, hasPool := strings.Cut(v, "=")
		if !hasPool {
			pool, config = "", v
		}
		if hasPool && pool == "" {
			return nil, fmt.Errorf("%w: --mig %s: empty pool name", ErrInput, v)
		}
		if !migConfigName.MatchString(config) {
			return nil, fmt.Errorf("%w: --mig %s: want single or mixed, CONFIG or POOL=CONFIG (a mig-parted config such as all-1g.10gb or all-disabled), or none", ErrInput, v)
		}
		if seen[pool] {
			what := "pool " + pool
			if pool == "" {
				what = "every GPU node"
			}
			return nil, fmt.Errorf("%w: --mig %s: %s has a config already", ErrInput, v, what)
		}
		seen[pool] = true
		c.Configs = append(c.Configs, MIGConfig{Pool: pool, Config: config})
	}
	if c.Strategy == "" {
		c.Strategy = MIGSingle
	}
	for _, cfg := range c.Configs {
		if c.Strategy == MIGSingle && cfg.Config == "all-balanced" {
			return nil, fmt.Errorf("%w: --mig %s: all-balanced makes MIG devices of several profiles, which only the mixed strategy advertises: add --mig mixed", ErrInput, cfg)
		}
	}
	return c, nil
}

// String is the config as --mig takes it.
func (c MIGConfig) String() string {
	if c.Pool == "" {
		return c.Config
	}
	return c.Pool + "=" + c.Config
}

// migProduct is what gpuctl knows of a GPU model's MIG: whether it has MIG at all, and the profiles
// one GPU offers (nil when the memory size, and so the profiles, cannot be told).
type migProduct struct {
	name     string
	capable  bool
	profiles []string
}

// MIG profiles per GPU model, from NVIDIA's MIG user guide, "Supported MIG Profiles"
// (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/#supported-mig-profiles). mig-parted's
// configs name the +me profiles with .me (all-1g.10gb.me).
var (
	migA100x40 = []string{"1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"}
	migX80     = []string{"1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"}
	migH100x94 = []string{"1g.12gb", "1g.12gb+me", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb"}
	migH200    = []string{"1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"}
	migA30     = []string{"1g.6gb", "1g.6gb+me", "2g.12gb", "2g.12gb+me", "4g.24gb"}
)

// migOf judges a GPU node's MIG from what detection saw: the GPU model a label names (GFD's
// nvidia.com/gpu.product, GKE's accelerator, Karpenter's GPU name), else the cloud instance type.
// MIG is on the A30, A100, H100, H200, B200 and GB200 families and the RTX PRO 6000 Blackwell server
// edition, not on T4, L4, L40S, A10, A10G, A2, A16, A40 or V100 (NVIDIA's MIG user guide, "Supported
// GPUs"). ok is false when gpuctl cannot tell.
func migOf(n detect.GPUNode) (p migProduct, ok bool) {
	if n.Product != "" {
		return migOfProduct(n.Product)
	}
	if n.InstanceType != "" {
		return migOfInstanceType(n.InstanceType)
	}
	return migProduct{}, false
}

func migOfProduct(product string) (migProduct, bool) {
	s := strings.ToLower(strings.NewReplacer("_", "-", " ", "-").Replace(product))
	has := func(subs ...string) bool {
		return slices.ContainsFunc(subs, func(sub string) bool { return strings.Contains(s, sub) })
	}
	p := migProduct{name: product, capable: true}
	switch {
	case has("h200"):
		p.profiles = migH200
	case has("h100") && has("94gb", "nvl"):
		p.profiles = migH100x94
	case has("h100", "h800"):
		p.profiles = migX80
	case has("a100", "a800") && has("80gb"):
		p.profiles = migX80
	case has("a100", "a800") && (has("40gb") || s == "nvidia-tesla-a100" || s == "a100"):
		// GKE's nvidia-tesla-a100 is the 40 GB A100 (a2-highgpu); Karpenter says only "a100".
		if s != "a100" {
			p.profiles = migA100x40
		}
	case has("a100", "a800", "b200", "b300", "gb200", "gb300", "rtx-pro-6000"):
	case has("a30"):
		p.profiles = migA30
	case has("t4", "l4", "l40", "a10", "a2-", "a16", "a40", "v100", "p100", "p4", "k80", "m60", "rtx"):
		p.capable = false
	case strings.HasSuffix(s, "-a2") || s == "a2":
		p.capable = false
	default:
		return migProduct{}, false
	}
	return p, true
}

// migOfInstanceType knows the clouds' GPU instance families by their GPU: AWS p4d/p4de (A100), p5
// (H100), p5e/p5en (H200), p6 (B200); Google a2 (A100), a3 (H100/H200), a4 (B200); Azure's names carry
// their GPU (Standard_ND96asr_A100_v4). The other families' GPUs have no MIG.
func migOfInstanceType(it string) (migProduct, bool) {
	s := strings.ToLower(it)
	switch {
	case strings.HasPrefix(s, "p4d") || strings.HasPrefix(s, "p5") || strings.HasPrefix(s, "p6") ||
		strings.HasPrefix(s, "a2-") || strings.HasPrefix(s, "a3-") || strings.HasPrefix(s, "a4-") ||
		strings.Contains(s, "a100") || strings.Contains(s, "h100") || strings.Contains(s, "h200"):
		return migProduct{name: "instance type " + it, capable: true}, true
	case strings.HasPrefix(s, "g4") || strings.HasPrefix(s, "g5") || strings.HasPrefix(s, "g6") || strings.HasPrefix(s, "gr6") ||
		strings.HasPrefix(s, "g2-") || strings.HasPrefix(s, "p3") || strings.HasPrefix(s, "p2") ||
		strings.Contains(s, "t4") || strings.Contains(s, "a10") || strings.HasPrefix(s, "standard_nv"):
		return migProduct{name: "instance type " + it, capable: false}, true
	}
	return migProduct{}, false
}

// configProfile is the one MIG profile a config of NVIDIA's "all-<profile>" form makes ("" for any
// other config: all-disabled, all-enabled, all-balanced, or the user's own).
func configProfile(config string) string {
	p, ok := strings.CutPrefix(config, "all-")
	if !ok || p == "disabled" || p == "enabled" || p == "balanced" {
		return ""
	}
	if base, me := strings.CutSuffix(p, ".me"); me {
		return base + "+me"
	}
	return p
}

// MIGStepID is the ID of --mig's node-labels step.
const MIGStepID = "mig-labels"

// What GPU feature discovery labels a GPU node with once the operator runs it (NVIDIA/k8s-device-plugin
// internal/lm/resource.go and mig-strategy.go@v0.20.0): the GPU model, and whether its GPUs can do MIG.
const (
	GPUProductLabel = "nvidia.com/gpu.product"
	MIGCapableLabel = "nvidia.com/mig.capable"
)

// KindMIGAfterGFD is --mig's node-labels step where gpuctl cannot tell, before the install, whether the
// GPUs of the nodes it would label can do MIG (k3s, kubeadm, bare metal: no GPU model or instance type
// it knows, or no GPU node known before NFD runs). The runner waits until GPU feature discovery has
// labelled those nodes nvidia.com/mig.capable, decides with DecideMIG, and then labels as
// KindNodeLabels does.
const KindMIGAfterGFD Kind = "mig-labels-after-gfd"

// MIGEveryGPUNode is the NodeLabels.Pools key of a config for every GPU node, where detection knew no
// GPU node before the install: the nodes NFD finds get it once GPU feature discovery says their GPUs
// take it. No pool is named so: a pool name is a label value, which cannot hold "*".
const MIGEveryGPUNode = "*"

// mig plans --mig: the values layer (mig.strategy, MIG manager on, WITH_REBOOT on GKE) and the step that
// labels each chosen pool's nodes with their config. It refuses, before anything is written, a pool
// detection does not know, a pool whose GPUs cannot do MIG, a profile a pool's GPUs do not offer, and
// -f or --set values that also set mig.strategy, and a strategy alone where no GPU node's GPUs can do
// MIG. Where it cannot tell (no GPU model or instance type it knows, or no GPU node known before NFD
// runs) the step decides after GPU feature discovery (KindMIGAfterGFD, DecideMIG). choice nil with
// --mig given ("none") plans a step that takes gpuctl's labels off, and no layer.
func (b *builder) mig() (*Layer, *Step, error) {
	if len(b.o.MIG) == 0 {
		return nil, nil, nil
	}
	choice, err := ParseMIG(b.o.MIG)
	if err != nil {
		return nil, nil, err
	}
	if b.o.DRA && choice != nil {
		return nil, nil, &DRAError{"--mig partitions GPUs for the device plugin's MIG strategies, which the DRA stack turns off: drop one of them"}
	}
	if err := b.refuseValuesAlso("--mig writes mig.strategy", "mig", "strategy"); err != nil {
		return nil, nil, err
	}
	pools := map[string][]detect.GPUNode{}
	var poolNames []string
	for _, n := range b.det.GPUNodes {
		if _, ok := pools[n.Pool]; !ok {
			poolNames = append(poolNames, n.Pool)
		}
		pools[n.Pool] = append(pools[n.Pool], n)
	}
	slices.Sort(poolNames)
	labels := &NodeLabels{Key: MIGLabel, Rule: strings.Replace(sharingRule, "a node that joins", "a MIG-capable node that joins", 1)}
	step := &Step{ID: MIGStepID, Kind: KindNodeLabels, Title: "Label the MIG pools' nodes " + MIGLabel,
		Why:    "NVIDIA's MIG manager partitions a node's GPUs as the mig-parted config its " + MIGLabel + " label names, and reports in " + MIGStateLabel,
		Labels: labels}
	if choice == nil {
		step.Why = "--mig none: gpuctl's " + MIGLabel + " labels from an earlier choice go; MIG mode stays as MIG manager last left it"
		return nil, step, nil
	}
	unknown, err := b.migLabels(choice, labels, pools, poolNames) // the nodes gpuctl cannot judge before GPU feature discovery
	if err != nil {
		return nil, nil, err
	}
	if len(choice.Configs) == 0 {
		// A strategy alone asks for MIG on whichever GPUs can do it: some must.
		if unknown, err = refuseMIGNowhere(choice, b.det.GPUNodes); err != nil {
			return nil, nil, err
		}
	}
	if len(labels.Pools) == 0 {
		step.Why = "--mig " + choice.Strategy + " names no config: MIG manager keeps each node's own " + MIGLabel
	}
	if len(unknown) > 0 {
		b.deferMIG(step, choice, unknown)
	}
	return &Layer{Source: MIGSource, Values: b.migValues(choice)}, step, nil
}

// migValues are the chart values of a --mig choice: its strategy, MIG manager on, and where the
// distribution's VMs cannot reset a GPU (GKE), MIG manager rebooting the node instead
// (https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/google-gke.html).
func (b *builder) migValues(choice *MIGChoice) map[string]any {
	values := map[string]any{}
	set(values, choice.Strategy, "mig", "strategy")
	set(values, true, "migManager", "enabled")
	if distro.Get(b.p.Distribution).MIGReboot {
		set(values, []any{map[string]any{"name": "WITH_REBOOT", "value": "true"}}, "migManager", "env")
	}
	return normalized(values)
}

// migLabels fills labels with the configs of choice: by node where the nodes are known (refusing a
// config a node's GPUs cannot take), by pool, or for every GPU node NFD finds. unknown are the nodes
// (or pools) whose GPUs gpuctl cannot judge before GPU feature discovery runs.
func (b *builder) migLabels(choice *MIGChoice, labels *NodeLabels, pools map[string][]detect.GPUNode, poolNames []string) (unknown []string, err error) {
	for _, c := range choice.Configs {
		nodes := b.det.GPUNodes
		if labels.Nodes == nil {
			labels.Pools, labels.Nodes = map[string]string{}, map[string]string{}
		}
		if c.Pool != "" {
			var ok bool
			nodes, ok = pools[c.Pool]
			switch {
			case !ok && b.o.Offline:
				// Rendered without a cluster: the pool's config, its GPUs judged by GPU feature discovery.
				labels.Pools[c.Pool] = c.Config
				unknown = append(unknown, "the GPU nodes of pool "+c.Pool)
				continue
			case !ok:
				return nil, fmt.Errorf("%w: --mig %s: no GPU node pool %q; the GPU pools are: %s", ErrInput, c, c.Pool, orNone(poolNames))
			}
		}
		if len(nodes) == 0 {
			// No GPU node is known before NFD runs: the nodes it finds get the config once GPU feature
			// discovery says what their GPUs are.
			labels.Pools[MIGEveryGPUNode] = c.Config
			unknown = append(unknown, "every GPU node NFD finds")
			continue
		}
		for _, n := range nodes {
			judged, err := refuseMIGOn(c, n)
			if err != nil {
				return nil, err
			}
			if !judged {
				unknown = append(unknown, n.Name)
			}
		}
		for _, n := range nodes {
			labels.Nodes[n.Name] = c.Config
			labels.Pools[n.Pool] = c.Config
		}
	}
	return unknown, nil
}

// refuseMIGOn refuses config c on GPU node n when detection shows n's GPUs cannot take it. judged is
// false when gpuctl cannot tell before GPU feature discovery runs.
func refuseMIGOn(c MIGConfig, n detect.GPUNode) (judged bool, err error) {
	if c.Config == migDisabled {
		return true, nil // turning MIG off is harmless anywhere
	}
	p, ok := migOf(n)
	if !ok {
		return false, nil
	}
	if !p.capable {
		return true, fmt.Errorf("%w: --mig %s: node %s (pool %s) has %s GPUs, which have no MIG (NVIDIA's MIG user guide lists the GPUs that do); choose the pools of MIG-capable GPUs", ErrInput, c, n.Name, n.Pool, p.name)
	}
	if prof := configProfile(c.Config); prof != "" && p.profiles != nil && !slices.Contains(p.profiles, prof) {
		return true, fmt.Errorf("%w: --mig %s: %s GPUs (node %s) have no MIG profile %s; theirs are %s", ErrInput, c, p.name, n.Name, prof, strings.Join(p.profiles, ", "))
	}
	return true, nil
}

// migDisabled is mig-parted's config that turns MIG off on every GPU of a node.
const migDisabled = "all-disabled"

// refuseMIGNowhere refuses a strategy without a config (--mig mixed) when detection shows that no GPU
// node's GPUs can do MIG. It returns the nodes it cannot judge when no node is known to have MIG
// ("every GPU node NFD finds" where none is known yet): GPU feature discovery decides for them.
func refuseMIGNowhere(choice *MIGChoice, nodes []detect.GPUNode) (unknown []string, err error) {
	if len(nodes) == 0 {
		return []string{"every GPU node NFD finds"}, nil
	}
	var without []string
	for _, n := range nodes {
		p, ok := migOf(n)
		switch {
		case !ok:
			unknown = append(unknown, n.Name)
		case p.capable:
			return nil, nil
		default:
			without = append(without, n.Name+" ("+p.name+")")
		}
	}
	if len(unknown) > 0 {
		return unknown, nil
	}
	return nil, fmt.Errorf("%w: --mig %s: no GPU node has a GPU with MIG: %s (NVIDIA's MIG user guide lists the GPUs that do); drop --mig", ErrInput, choice.Strategy, strings.Join(without, ", "))
}

// deferMIG makes the MIG step decide after GPU feature discovery, for the nodes (or "every GPU node
// NFD finds") whose GPUs gpuctl cannot judge now; the dry run says so.
func (b *builder) deferMIG(step *Step, choice *MIGChoice, unknown []string) {
	step.Kind = KindMIGAfterGFD
	step.Title += " (decided after GPU Feature Discovery)"
	step.Why = "GPU Feature Discovery names the GPU nodes' models (" + GPUProductLabel + ", " + MIGCapableLabel + ") only once the operator runs it: " +
		"gpuctl waits for those labels, labels the nodes whose GPUs take their config, and stops with exit 2 if no GPU can honour --mig"
	values := []string{choice.Strategy}
	for _, c := range choice.Configs {
		values = append(values, c.String())
	}
	b.p.Warnings = append(b.p.Warnings, fmt.Sprintf("--mig %s: gpuctl cannot tell before the install whether the GPUs of %s can do MIG (no GPU model or instance type it knows yet); "+
		"it will decide after GPU Feature Discovery has labelled the GPU nodes (%s): only nodes whose GPUs take the config are labelled, and the install stops with exit 2 if none can",
		strings.Join(values, " "), strings.Join(unknown, ", "), MIGCapableLabel))
}

// GFDNode is what GPU feature discovery says of a GPU node's GPUs.
type GFDNode struct {
	Name string
	// Product is nvidia.com/gpu.product ("" when GFD has not named it).
	Product string
	// MIGCapable is nvidia.com/mig.capable=true.
	MIGCapable bool
}

// GFDNodeOf reads GPU feature discovery's labels of a node.
func GFDNodeOf(n *corev1.Node) GFDNode {
	return GFDNode{Name: n.Name, Product: n.Labels[GPUProductLabel], MIGCapable: n.Labels[MIGCapableLabel] == "true"}
}

// DecideMIG decides a KindMIGAfterGFD step from what GPU feature discovery says of the GPU nodes: each
// planned node, and for MIGEveryGPUNode every GPU node, keeps its config where its GPUs can take it
// (MIG-capable, and for an all-<profile> config a GPU gpuctl knows to offer that profile, or one it does
// not know); all-disabled goes anywhere. A config no GPU of its nodes can take is refused, and so is a
// strategy alone (no config) where no GPU node is MIG-capable: a mistake in the inputs, named with
// each node and its GPU. Where some of a config's nodes can and some cannot, the config goes on the
// nodes that can, and a warning names the others: MIG manager runs only on MIG-capable nodes, so a
// label elsewhere would only read as a choice that is not there.
func DecideMIG(l *NodeLabels, nodes []GFDNode) (map[string]string, []string, error) {
	sorted := slices.SortedFunc(slices.Values(nodes), func(a, b GFDNode) int { return strings.Compare(a.Name, b.Name) })
	decided := map[string]string{}
	var warnings []string
	if len(l.Nodes) == 0 && l.Pools[MIGEveryGPUNode] == "" {
		var without []string
		for _, n := range sorted {
			if n.MIGCapable {
				return decided, nil, nil
			}
			without = append(without, n.Name+" ("+productName(n)+")")
		}
		return nil, nil, fmt.Errorf("%w: --mig: GPU Feature Discovery found no GPU with MIG on the GPU nodes: %s (NVIDIA's MIG user guide lists the GPUs that do); "+
			"nothing was labelled: take --mig off (gpuctl upgrade --mig none)", ErrInput, orNone(without))
	}
	kept, left := map[string][]string{}, map[string][]string{}
	var configs []string
	for _, n := range sorted {
		config, ok := l.Nodes[n.Name]
		if !ok {
			config = l.Pools[MIGEveryGPUNode]
		}
		if config == "" {
			continue
		}
		if _, seen := kept[config]; !seen {
			configs = append(configs, config)
			kept[config] = nil
		}
		if why := migNotOn(config, n); why != "" {
			left[config] = append(left[config], n.Name+" ("+why+")")
			continue
		}
		decided[n.Name] = config
		kept[config] = append(kept[config], n.Name)
	}
	for _, config := range configs {
		switch {
		case len(left[config]) == 0:
		case len(kept[config]) == 0:
			return nil, nil, fmt.Errorf("%w: --mig %s: GPU Feature Discovery found no GPU that takes it: %s (NVIDIA's MIG user guide lists the GPUs and their profiles); "+
				"nothing was labelled: choose the pools of MIG-capable GPUs (gpuctl detect names them now), or take --mig off (gpuctl upgrade --mig none)", ErrInput, config, strings.Join(left[config], ", "))
		default:
			warnings = append(warnings, fmt.Sprintf("--mig %s: labelled on %s; not on %s, whose GPUs do not take it", config, strings.Join(kept[config], ", "), strings.Join(left[config], ", ")))
		}
	}
	return decided, warnings, nil
}

// migNotOn says why node n's GPUs cannot take config ("" when they can).
func migNotOn(config string, n GFDNode) string {
	if config == migDisabled {
		return ""
	}
	if !n.MIGCapable {
		return productName(n)
	}
	p, known := migOfProduct(n.Product)
	if prof := configProfile(config); known && prof != "" && p.profiles != nil && !slices.Contains(p.profiles, prof) {
		return productName(n) + ", no MIG profile " + prof
	}
	return ""
}

func productName(n GFDNode) string {
	if n.Product == "" {
		return "GPU not named"
	}
	return n.Product
}

// MIGRepartition are the nodes, sorted, whose nvidia.com/mig.config the MIG step l changes: MIG manager
// repartitions their GPUs (a GPU reset, or on GKE a node reboot), which stops the GPU pods on them. The
// upgrade preview and preflight's gpu-work check name the same nodes.
func MIGRepartition(l *NodeLabels, nodes []corev1.Node) []string {
	if l == nil {
		return nil
	}
	var out []string
	for _, n := range nodes {
		if want, ok := l.Nodes[n.Name]; ok && n.Labels[l.Key] != want {
			out = append(out, n.Name)
		}
	}
	slices.Sort(out)
	return out
}

// refuseValuesAlso refuses -f or --set values that set the operator value at path, which a flag
// (what) writes: one would silently win over the other.
func (b *builder) refuseValuesAlso(what string, path ...string) error {
	var layers []Layer
	for _, f := range b.o.Files {
		layers = append(layers, Layer{Source: "file " + f.Source, Values: f.Values})
	}
	if len(b.o.Set) > 0 {
		layers = append(layers, Layer{Source: "--set", Values: b.o.Set})
	}
	for _, l := range layers {
		op, _ := split(l.Values)
		if at(op, path...) != nil {
			return fmt.Errorf("%w: %s, and %s sets %s too: give one of them", ErrInput, what, l.Source, strings.Join(path, "."))
		}
	}
	return nil
}
