package bank

import "github.com/densitykv/densitykv/internal/vocab"

// Every variant type of the bank has one name per value, the
// configuration's (memory.bank.* in YAML, the --ordering … flags): String
// returns it, MarshalText writes it, UnmarshalText reads it exactly and
// rejects anything else with an error naming the name read and the names
// allowed; Names lists them in value order.

var (
	orderingNames   = vocab.List{Pkg: "bank", Kind: "ordering", Names: []string{"mean", "max", "source"}}
	baselinesNames  = vocab.List{Pkg: "bank", Kind: "baselines", Names: []string{"frozen", "refresh"}}
	evictionNames   = vocab.List{Pkg: "bank", Kind: "eviction", Names: []string{"mandatory-densest", "densest", "mandatory-source"}}
	prefixNames     = vocab.List{Pkg: "bank", Kind: "prefix", Names: []string{"shared", "per-head"}}
	admissionNames  = vocab.List{Pkg: "bank", Kind: "admission", Names: []string{"joint", "sequential"}}
	payloadNames    = vocab.List{Pkg: "bank", Kind: "payload", Names: []string{"bf16", "f32"}}
	dtypeNames      = vocab.List{Pkg: "bank", Kind: "dtype", Names: []string{"f32", "bf16", "f64"}}
	descriptorNames = vocab.List{Pkg: "bank", Kind: "descriptor", Names: []string{"post-rope-key", "pre-rope-key", "key-value", "pre-rope-key-value"}}
)

func (o Ordering) String() string                { return orderingNames.String(uint8(o), "Ordering") }
func (o Ordering) MarshalText() ([]byte, error)  { return orderingNames.Marshal(uint8(o)) }
func (o *Ordering) UnmarshalText(b []byte) error { return unmarshal(orderingNames, b, o) }

// Names lists the orderings' names: mean, max, source.
func (Ordering) Names() []string { return orderingNames.All() }

func (v Baselines) String() string                { return baselinesNames.String(uint8(v), "Baselines") }
func (v Baselines) MarshalText() ([]byte, error)  { return baselinesNames.Marshal(uint8(v)) }
func (v *Baselines) UnmarshalText(b []byte) error { return unmarshal(baselinesNames, b, v) }

// Names lists the baseline rules' names: frozen, refresh.
func (Baselines) Names() []string { return baselinesNames.All() }

func (e Eviction) String() string                { return evictionNames.String(uint8(e), "Eviction") }
func (e Eviction) MarshalText() ([]byte, error)  { return evictionNames.Marshal(uint8(e)) }
func (e *Eviction) UnmarshalText(b []byte) error { return unmarshal(evictionNames, b, e) }

// Names lists the eviction rules' names: mandatory-densest, densest,
// mandatory-source.
func (Eviction) Names() []string { return evictionNames.All() }

func (p Prefix) String() string                { return prefixNames.String(uint8(p), "Prefix") }
func (p Prefix) MarshalText() ([]byte, error)  { return prefixNames.Marshal(uint8(p)) }
func (p *Prefix) UnmarshalText(b []byte) error { return unmarshal(prefixNames, b, p) }

// Names lists the prefix rules' names: shared, per-head.
func (Prefix) Names() []string { return prefixNames.All() }

func (a Admission) String() string                { return admissionNames.String(uint8(a), "Admission") }
func (a Admission) MarshalText() ([]byte, error)  { return admissionNames.Marshal(uint8(a)) }
func (a *Admission) UnmarshalText(b []byte) error { return unmarshal(admissionNames, b, a) }

// Names lists the admission rules' names: joint, sequential.
func (Admission) Names() []string { return admissionNames.All() }

func (p Payload) String() string                { return payloadNames.String(uint8(p), "Payload") }
func (p Payload) MarshalText() ([]byte, error)  { return payloadNames.Marshal(uint8(p)) }
func (p *Payload) UnmarshalText(b []byte) error { return unmarshal(payloadNames, b, p) }

// Names lists the payloads' names: bf16, f32.
func (Payload) Names() []string { return payloadNames.All() }

func (d DType) String() string                { return dtypeNames.String(uint8(d), "DType") }
func (d DType) MarshalText() ([]byte, error)  { return dtypeNames.Marshal(uint8(d)) }
func (d *DType) UnmarshalText(b []byte) error { return unmarshal(dtypeNames, b, d) }

// Names lists the dtypes' names: f32, bf16, f64 (densities take f32 or
// f64).
func (DType) Names() []string { return dtypeNames.All() }

func (d Descriptor) String() string                { return descriptorNames.String(uint8(d), "Descriptor") }
func (d Descriptor) MarshalText() ([]byte, error)  { return descriptorNames.Marshal(uint8(d)) }
func (d *Descriptor) UnmarshalText(b []byte) error { return unmarshal(descriptorNames, b, d) }

// Names lists the descriptors' names: post-rope-key, pre-rope-key,
// key-value, pre-rope-key-value.
func (Descriptor) Names() []string { return descriptorNames.All() }

// unmarshal sets *v to the value named b; on error *v is unchanged.
func unmarshal[T ~uint8](l vocab.List, b []byte, v *T) error {
	x, err := l.Parse(b)
	if err != nil {
		return err
	}
	*v = T(x)
	return nil
}
