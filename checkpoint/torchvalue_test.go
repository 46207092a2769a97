package checkpoint

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/internal/torchtest"
)

// TorchValue reads a checkpoint's plain-data entry (the LongLive-RAG
// autoencoder's "config" next to its "model" state dict) as Go values, and
// names the entry and key path of anything that is not plain data.
func TestTorchValue(t *testing.T) {
	w := &torchtest.Tensor{Shape: []int{2}, Data: []float32{1, 2}}
	file := torchtest.Bytes(torchtest.Dict{
		{Key: "config", Value: torchtest.Dict{
			{Key: "in_channels", Value: 16}, {Key: "hidden_dims", Value: torchtest.List{64, 128, -3}},
			{Key: "lr", Value: 3e-4}, {Key: "name", Value: "base"}, {Key: "amp", Value: true}, {Key: "gpu", Value: nil},
			{Key: "nested", Value: torchtest.Dict{{Key: "x", Value: torchtest.List{torchtest.List{1.5}}}}},
		}},
		{Key: "model", Value: torchtest.Dict{{Key: "fc.weight", Value: w}}},
		{Key: "bad", Value: torchtest.Dict{{Key: "a", Value: torchtest.List{1, w}}}},
	}, torchtest.Options{})
	r := bytes.NewReader(file)
	got, err := TorchValue(r, int64(len(file)), "config")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"in_channels": int64(16), "hidden_dims": []any{int64(64), int64(128), int64(-3)}, "lr": 3e-4,
		"name": "base", "amp": true, "gpu": nil, "nested": map[string]any{"x": []any{[]any{1.5}}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("config %#v, want %#v", got, want)
	}
	// The state dict is still read by LoadTorch from the same file.
	sd, err := LoadTorch(r, int64(len(file)), TorchOptions{Entry: "model"})
	if err != nil || len(sd) != 1 || !reflect.DeepEqual(sd["fc.weight"].Data, []float32{1, 2}) {
		t.Fatalf("model entry: %v %v", sd, err)
	}
	for _, c := range []struct{ entry, msg string }{
		{"bad", "bad.a[1]: holds a tensor"},
		{"model", "model.fc.weight: holds a tensor"},
		{"missing", `no entry "missing" (have bad, config, model)`},
	} {
		if _, err := TorchValue(r, int64(len(file)), c.entry); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: error %v, want %q", c.entry, err, c.msg)
		}
	}
	if _, err := TorchValue(bytes.NewReader(file[:len(file)/2]), int64(len(file)/2), "config"); err == nil {
		t.Error("truncated file accepted")
	}
}
