package vulkantest

import (
	"strings"
	"testing"
)

func TestWanted(t *testing.T) {
	for _, tc := range []struct {
		env      string
		index    int
		required bool
		err      string
	}{
		{"", 0, false, ""},
		{"cpu", -1, false, ""},
		{"vulkan", 0, true, ""},
		{"vulkan:2", 2, true, ""},
		{"vulkan:x", 0, true, "vulkan:N with N a device index"},
		{"vulkan:-1", 0, true, "vulkan:N with N a device index"},
		{"gpu", 0, false, "want vulkan or vulkan:N"},
	} {
		t.Setenv(Env, tc.env)
		index, required, err := Wanted()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), Env) {
				t.Errorf("%q: %v, want an error naming %s with %q", tc.env, err, Env, tc.err)
			}
			continue
		}
		if err != nil || index != tc.index || required != tc.required {
			t.Errorf("%q: %d, %v, %v; want %d, %v", tc.env, index, required, err, tc.index, tc.required)
		}
	}
}
