package deps
import (
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/dynamic"
	_ "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	_ "k8s.io/cli-runtime/pkg/genericclioptions"
	_ "helm.sh/helm/v4/pkg/action"
	_ "github.com/spf13/cobra"
	_ "github.com/spf13/viper"
	_ "github.com/Masterminds/semver/v3"
	_ "sigs.k8s.io/yaml"
)
