// Command istio-envoyfilter runs Istio's own EnvoyFilter code outside istiod, so that the project's
// generated EnvoyFilters (ssh_gateway/core/connect.py) are checked and applied exactly as a gateway's
// istiod would, without a cluster:
//
//	istio-envoyfilter validate FILE...
//	    Parses every document (YAML or JSON, multi-document) as Istio does for a CRD object and runs
//	    pkg/config/validation/envoyfilter.ValidateEnvoyFilter, or for a Gateway (networking.istio.io)
//	    pkg/config/validation.ValidateGateway. Prints Istio's error and exits 1 on the first invalid
//	    object; warnings go to stderr prefixed "warning:".
//
//	istio-envoyfilter patch --filters FILE [--filters FILE...] --namespace NS --labels k=v[,k=v]
//	                        [--listener LISTENER.json] [--route ROUTE.json]
//	    Loads the (validated) EnvoyFilters into istiod's in-memory config store, builds a PushContext,
//	    selects the filters for a gateway proxy (model.Router) in NS with the given pod labels
//	    (PushContext.EnvoyFilters: workloadSelector, root namespace, priority order), then applies
//	    them with pilot/pkg/networking/core/envoyfilter: ApplyListenerPatches to the listener and
//	    ApplyRouteConfigurationPatches to the route configuration, in patch context GATEWAY. Prints
//	    {"listener": ..., "routeConfiguration": ...} on stdout, Envoy JSON with snake_case field names.
//
// Exit codes: 0 ok, 1 invalid input (Istio's message on stderr), 2 usage.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"time"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	kubeyaml "k8s.io/apimachinery/pkg/util/yaml"

	networking "istio.io/api/networking/v1alpha3"
	"istio.io/istio/pilot/pkg/config/kube/crd"
	"istio.io/istio/pilot/pkg/config/memory"
	"istio.io/istio/pilot/pkg/model"
	"istio.io/istio/pilot/pkg/networking/core/envoyfilter"
	memregistry "istio.io/istio/pilot/pkg/serviceregistry/memory"
	"istio.io/istio/pkg/config"
	"istio.io/istio/pkg/config/mesh"
	"istio.io/istio/pkg/config/mesh/meshwatcher"
	"istio.io/istio/pkg/config/schema/collections"
	"istio.io/istio/pkg/config/schema/gvk"
	"istio.io/istio/pkg/config/schema/resource"
	"istio.io/istio/pkg/config/validation"
	efvalidation "istio.io/istio/pkg/config/validation/envoyfilter"
	"istio.io/istio/pkg/kube"
	"istio.io/istio/pkg/kube/krt"
	istiolog "istio.io/istio/pkg/log"
	"istio.io/istio/pkg/util/protomarshal"
)

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func main() {
	// istiod's packages log at info level to stderr; the caller wants only our own lines there.
	opts := istiolog.DefaultOptions()
	opts.SetDefaultOutputLevel(istiolog.OverrideScopeName, istiolog.ErrorLevel)
	_ = istiolog.Configure(opts)

	err := run(os.Args[1:], os.Stdout, os.Stderr)
	var usage usageError
	switch {
	case err == nil:
	case errors.As(err, &usage):
		fmt.Fprintln(os.Stderr, "istio-envoyfilter:", err)
		fmt.Fprintln(os.Stderr, "usage: istio-envoyfilter validate FILE... | patch --filters FILE --namespace NS --labels k=v "+
			"[--listener FILE] [--route FILE]")
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "istio-envoyfilter:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{"no command"}
	}
	switch args[0] {
	case "validate":
		if len(args) < 2 {
			return usageError{"validate needs at least one FILE"}
		}
		_, err := loadConfigs(args[1:], true, stderr)
		return err
	case "patch":
		return patch(args[1:], stdout, stderr)
	default:
		return usageError{fmt.Sprintf("unknown command %q (allowed: validate, patch)", args[0])}
	}
}

// loadFilters reads every document of every file and returns the EnvoyFilters after Istio's validation.
func loadFilters(paths []string, stderr io.Writer) ([]config.Config, error) {
	return loadConfigs(paths, false, stderr)
}

// loadConfigs reads every document of every file and returns them after Istio's validation: EnvoyFilters
// and, with gateways, Istio Gateways. Documents of any other kind are refused: the helper is only ever given
// these, so anything else is a mistake worth naming. Creation times follow the document order, so istiod's
// tie-break (priority, then creation time, then name) keeps the order the caller wrote.
func loadConfigs(paths []string, gateways bool, stderr io.Writer) ([]config.Config, error) {
	var out []config.Config
	created := time.Unix(1_700_000_000, 0)
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		decoder := kubeyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 512*1024)
		for doc := 1; ; doc++ {
			obj := crd.IstioKind{}
			if err := decoder.Decode(&obj); err == io.EOF {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: document %d: cannot parse: %v", path, doc, err)
			}
			if reflect.DeepEqual(obj, crd.IstioKind{}) {
				continue
			}
			where := fmt.Sprintf("%s: %s %s/%s", path, obj.Kind, obj.Namespace, obj.Name)
			k := obj.GroupVersionKind()
			schema, found := collections.Pilot.FindByGroupVersionAliasesKind(resource.FromKubernetesGVK(&k))
			kind := ""
			if found {
				kind = schema.GroupVersionKind().Kind
			}
			if kind != gvk.EnvoyFilter.Kind && (!gateways || kind != gvk.Gateway.Kind) {
				allowed := "an EnvoyFilter"
				if gateways {
					allowed = "an EnvoyFilter or an Istio Gateway"
				}
				return nil, fmt.Errorf("%s: not %s (apiVersion %q, kind %q)", where, allowed, obj.APIVersion, obj.Kind)
			}
			if obj.Name == "" {
				return nil, fmt.Errorf("%s: metadata.name is empty", where)
			}
			// Strict decoding, as the CRD's structural schema refuses unknown fields in a kube-apiserver;
			// istiod itself decodes leniently because the apiserver already did this.
			cfg, err := crd.ConvertObjectInternal(schema, &obj, "", strictFromJSON)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", where, err)
			}
			if cfg.Namespace == "" {
				cfg.Namespace = "default"
			}
			cfg.CreationTimestamp = created
			created = created.Add(time.Second)
			validate := efvalidation.ValidateEnvoyFilter
			if kind == gvk.Gateway.Kind {
				validate = validation.ValidateGateway
			}
			warning, err := validate(*cfg)
			if warning != nil {
				for _, line := range strings.Split(warning.Error(), "\n") {
					if line = strings.TrimSpace(line); line != "" {
						fmt.Fprintf(stderr, "warning: %s: %s\n", where, line)
					}
				}
			}
			if err != nil {
				return nil, fmt.Errorf("%s: invalid: %v", where, err)
			}
			out = append(out, *cfg)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no Istio object in %s", strings.Join(paths, ", "))
	}
	return out, nil
}

func strictFromJSON(s resource.Schema, js string) (config.Spec, error) {
	spec, err := s.NewInstance()
	if err != nil {
		return nil, err
	}
	if err := config.ApplyJSONStrict(spec, js); err != nil {
		return nil, err
	}
	return spec, nil
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func patch(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("patch", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var filters listFlag
	fs.Var(&filters, "filters", "EnvoyFilter manifest file (repeatable)")
	namespace := fs.String("namespace", "istio-system", "the gateway pod's namespace")
	labels := fs.String("labels", "", "the gateway pod's labels, k=v[,k=v]")
	listenerPath := fs.String("listener", "", "Envoy JSON of the gateway listener to patch")
	routePath := fs.String("route", "", "Envoy JSON of the gateway route configuration to patch")
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if len(filters) == 0 || (*listenerPath == "" && *routePath == "") {
		return usageError{"patch needs --filters and at least one of --listener, --route"}
	}
	podLabels, err := parseLabels(*labels)
	if err != nil {
		return usageError{err.Error()}
	}
	configs, err := loadFilters(filters, stderr)
	if err != nil {
		return err
	}
	push, err := pushContext(configs)
	if err != nil {
		return err
	}
	proxy := &model.Proxy{
		Type:            model.Router,
		ConfigNamespace: *namespace,
		Labels:          podLabels,
		Metadata:        &model.NodeMetadata{Labels: podLabels, Namespace: *namespace},
	}
	efw := push.EnvoyFilters(proxy)

	result := map[string]json.RawMessage{}
	if *listenerPath != "" {
		lis := &listener.Listener{}
		if err := readEnvoyJSON(*listenerPath, lis); err != nil {
			return err
		}
		patched := envoyfilter.ApplyListenerPatches(networking.EnvoyFilter_GATEWAY, efw, []*listener.Listener{lis}, false)
		switch len(patched) {
		case 0:
			result["listener"] = json.RawMessage("null") // an EnvoyFilter REMOVEd it
		default:
			if result["listener"], err = envoyJSON(patched[0]); err != nil {
				return err
			}
			for i, extra := range patched[1:] { // LISTENER ADD patches
				if result[fmt.Sprintf("addedListener%d", i)], err = envoyJSON(extra); err != nil {
					return err
				}
			}
		}
	}
	if *routePath != "" {
		rc := &route.RouteConfiguration{}
		if err := readEnvoyJSON(*routePath, rc); err != nil {
			return err
		}
		patched := envoyfilter.ApplyRouteConfigurationPatches(networking.EnvoyFilter_GATEWAY, proxy, efw, rc)
		if result["routeConfiguration"], err = envoyJSON(patched); err != nil {
			return err
		}
	}
	encoded, err := json.MarshalIndent(result, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, string(encoded))
	return err
}

func parseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	if s == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--labels: %q is not k=v", kv)
		}
		out[k] = v
	}
	return out, nil
}

// pushContext builds the PushContext istiod would compute from these EnvoyFilters alone, the way
// istiod's own envoyfilter tests do (listener_patch_test.go newTestEnvironment): an in-memory config store,
// an empty service registry and the default mesh config (root namespace istio-system).
func pushContext(configs []config.Config) (*model.PushContext, error) {
	store := memory.NewController(memory.Make(collections.Pilot))
	for _, cfg := range configs {
		if _, err := store.Create(cfg); err != nil {
			return nil, fmt.Errorf("EnvoyFilter %s/%s: %v", cfg.Namespace, cfg.Name, err)
		}
	}
	meshCfg := mesh.DefaultMeshConfig()
	env := &model.Environment{
		ServiceDiscovery: memregistry.NewServiceDiscovery(),
		ConfigStore:      store,
		Watcher:          meshwatcher.NewTestWatcher(meshCfg),
	}
	env.VirtualServiceController = model.NewVirtualServiceController(
		store, model.VSControllerOptions{KrtDebugger: krt.GlobalDebugHandler}, meshwatcher.NewTestWatcher(meshCfg))
	stop := make(chan struct{})
	defer close(stop)
	go store.Run(stop)
	go env.VirtualServiceController.Run(stop)
	if !kube.WaitForCacheSync("istio-envoyfilter", stop, store.HasSynced, env.VirtualServiceController.HasSynced) {
		return nil, errors.New("istiod's in-memory config store did not sync")
	}
	env.Init()
	push := model.NewPushContext()
	push.InitContext(env, nil, nil)
	return push, nil
}

func readEnvoyJSON(path string, msg proto.Message) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := protomarshal.Unmarshal(data, msg); err != nil {
		return fmt.Errorf("%s: not a valid %s: %v", path, msg.ProtoReflect().Descriptor().FullName(), err)
	}
	return nil
}

// envoyJSON is Envoy's JSON with the protos' own field names (snake_case), as Envoy's docs and EnvoyFilter
// patches spell them.
func envoyJSON(msg proto.Message) (json.RawMessage, error) {
	b, err := protomarshal.MarshalProtoNames(msg)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(b), nil
}
