package plan

// FlagKeys are the operator values the layers of o's flags write (--monitoring, --sharing, --mig,
// --dra, --precompiled), as a values map whose leaves only say that the key is set. An upgrade's value
// findings (internal/bundle's Compare) do not count a default that changes under a key one of gpuctl's
// own flags sets: the flag decides it, whatever the release's default. TestFlagKeysCoverTheLayers
// keeps this list and the layers alike.
func FlagKeys(o Options) map[string]any {
	v := map[string]any{}
	if o.Monitoring {
		set(v, true, "dcgmExporter", "serviceMonitor", "enabled")
		set(v, true, "operator", "metrics", "serviceMonitor", "enabled")
	}
	if choices, err := ParseSharing(o.Sharing); err == nil && len(choices) > 0 {
		set(v, true, "devicePlugin", "config")
	}
	if choice, err := ParseMIG(o.MIG); err == nil && choice != nil {
		set(v, true, "mig", "strategy")
		set(v, true, "migManager", "enabled")
		set(v, true, "migManager", "env")
	}
	if o.DRA {
		v = MergeValues(v, draValues())
	}
	if o.Precompiled != "" {
		set(v, true, "driver", "usePrecompiled")
		for _, k := range []string{"enabled", "deployDefaultCR", "kernelDrivers"} {
			set(v, true, "driver", "nvidiaDriverCRD", k)
		}
	}
	return v
}
