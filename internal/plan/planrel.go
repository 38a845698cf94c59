package plan

// RunningReleases are the plan's release steps that run (not skipped), in order.
func (p *Plan) RunningReleases() []*Release {
	var out []*Release
	for _, s := range p.Steps {
		if s.Kind == KindRelease && s.Skip == "" && s.Release != nil {
			out = append(out, s.Release)
		}
	}
	return out
}

// ReleaseNamespace is where release r of the plan is installed (and Helm stores it).
func (p *Plan) ReleaseNamespace(r *Release) string {
	if r.Namespace != "" {
		return r.Namespace
	}
	return p.Namespace
}
