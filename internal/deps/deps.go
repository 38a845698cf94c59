package deps

import (
	_ "github.com/Masterminds/semver/v3"
	_ "github.com/spf13/cobra"
	_ "github.com/spf13/viper"
	_ "helm.sh/helm/v4/pkg/action"
	_ "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	_ "k8s.io/cli-runtime/pkg/genericclioptions"
	_ "k8s.io/client-go/dynamic"
	_ "k8s.io/client-go/kubernetes"
	_ "sigs.k8s.io/yaml"
)
