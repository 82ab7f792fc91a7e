package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"

	"github.com/getorrery/orrery/ui"
	"github.com/getorrery/orrery/ui/component"
)

// DeclaredComponent is one [[provides.components]] of an extension's
// manifest: a structure over the catalog orrery/1 and the JSON Schema its
// data must match.
type DeclaredComponent struct {
	// Name is the component's name, as ui.show's component names it: 1 to
	// 64 letters, digits, ".", "_" or "-", starting with a letter or digit.
	Name string
	// Structure is the component's structure.
	Structure json.RawMessage
	// Schema is the JSON Schema of its data (draft 2020-12 unless its
	// $schema says otherwise). Empty means no schema: the data is checked
	// only by binding it into the structure.
	Schema json.RawMessage
}

// ExtensionUI is what an extension's manifest declares for the UI: its
// components and, for an extension with runtime "none", its actions.
type ExtensionUI struct {
	// Components are its [[provides.components]].
	Components []DeclaredComponent
	// Runtime is the manifest's runtime. With "none" no process runs: a
	// committed action on its component runs the declared action of that
	// name through IntentHandler.RunAction.
	Runtime string
	// Actions are the names of its [provides.actions.<name>].
	Actions []string
}

// RuntimeNone is the runtime of an extension that runs no process.
const RuntimeNone = "none"

// declared is a registered component, parsed once.
type declared struct {
	structure *component.Structure
	err       error // a structure the catalog refuses: every show fails with it
	schema    *component.Schema
}

// extensionUI is a registered extension.
type extensionUI struct {
	components map[string]declared
	runtime    string
	actions    []string
}

// registry holds the extensions' declared components. It is shared by every
// session of a kernel.
type registry struct {
	mu   sync.Mutex // guards exts
	exts map[ui.Owner]*extensionUI
}

var componentName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// RegisterComponents records what extension owner declares, replacing what
// it declared before; the extension host calls it when it loads a
// manifest. Every component is registered, but the error names each whose
// structure the catalog orrery/1 refuses or whose schema is not valid JSON
// Schema: every show and update of such a component is refused with that
// problem, so fix it in orrery.toml.
func (k *Kernel) RegisterComponents(owner ui.Owner, decl ExtensionUI) error {
	ext, ok := owner.Ext()
	if !ok {
		return fmt.Errorf("register components: %s is not an extension; only an ext:<id> owner declares components", owner)
	}
	if _, err := ui.ParseOwner(string(owner)); err != nil {
		return fmt.Errorf("register components: %w", err)
	}
	reg := &extensionUI{components: map[string]declared{}, runtime: decl.Runtime, actions: slices.Clone(decl.Actions)}
	var errs []error
	for _, c := range decl.Components {
		if !componentName.MatchString(c.Name) {
			errs = append(errs, fmt.Errorf("extension %s: component name %q is not valid; name it with 1 to 64 letters, digits, \".\", \"_\" or \"-\", starting with a letter or digit, under [[provides.components]] in orrery.toml", ext, c.Name))
			continue
		}
		if _, dup := reg.components[c.Name]; dup {
			errs = append(errs, fmt.Errorf("extension %s declares component %q twice; give each [[provides.components]] its own name", ext, c.Name))
			continue
		}
		d := declared{}
		d.structure, d.err = component.Parse(c.Structure, k.cfg.Limits)
		if d.err != nil {
			d.err = fmt.Errorf("component %q of extension %s: %w; fix its structure under [[provides.components]] in orrery.toml", c.Name, ext, d.err)
			errs = append(errs, d.err)
		}
		if len(c.Schema) > 0 {
			d.schema = component.NewSchema(c.Name, c.Schema)
			if err := d.schema.Err(); err != nil {
				errs = append(errs, err)
			}
		}
		reg.components[c.Name] = d
	}
	k.components.mu.Lock()
	if k.components.exts == nil {
		k.components.exts = map[ui.Owner]*extensionUI{}
	}
	k.components.exts[owner] = reg
	k.components.mu.Unlock()
	return errors.Join(errs...)
}

// UnregisterComponents forgets what extension owner declared, as when it
// unloads. What it placed stays until Session.RemoveOwner removes it.
func (k *Kernel) UnregisterComponents(owner ui.Owner) {
	k.components.mu.Lock()
	delete(k.components.exts, owner)
	k.components.mu.Unlock()
}

// extension returns what owner registered, or nil.
func (r *registry) extension(owner ui.Owner) *extensionUI {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.exts[owner]
}

// declaredBy returns the extensions that declare a component named name,
// for the agent's refusal.
func (r *registry) declaredBy(name string) []ui.Owner {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ui.Owner
	for o, e := range r.exts {
		if _, ok := e.components[name]; ok {
			out = append(out, o)
		}
	}
	slices.Sort(out)
	return out
}

// Intent is a committed action on a placed component: a press, a submit, a
// choice or an open that the component's structure declares.
type Intent struct {
	// Session is the session's id.
	Session string
	// Owner placed the component; ID is the id it placed it under.
	Owner ui.Owner
	ID    string
	// Action is the action id the structure names.
	Action string
	// Value is what came with it (a form's values, the chosen item, a
	// row), or nil for none.
	Value json.RawMessage
}

// IntentHandler delivers committed actions to extensions; the extension
// host implements it. Both methods are called outside the session actor and
// may block until ctx ends.
type IntentHandler interface {
	// Intent sends the action to the running extension that owns the
	// component, as a ui/event notification. It returns an error wrapping
	// ErrOwnerNotRunning when the extension is not running (unloaded,
	// crashed, parked and not restartable).
	Intent(ctx context.Context, in Intent) error
	// RunAction runs [provides.actions.<in.Action>] of an extension whose
	// runtime is "none". The kernel calls it only for an action the
	// extension registered in ExtensionUI.Actions.
	RunAction(ctx context.Context, in Intent) error
}

// ErrOwnerNotRunning is what IntentHandler.Intent wraps when the
// component's extension is not running.
var ErrOwnerNotRunning = errors.New("the extension is not running")

// Opener opens a link on the host's own screen.
type Opener interface {
	// Open hands target (an http(s) URL, or an absolute path inside the
	// workspace that exists) to the system's opener as one argument. It
	// must not wait for the opened program: start it and return.
	Open(ctx context.Context, target string) error
}
