package classify

import "testing"

func TestTrainAndClassify(t *testing.T) {
	m, err := Train([]Example{
		{"I want my money back", "refund"},
		{"refund my order please", "refund"},
		{"where is my parcel", "shipping"},
		{"track my package delivery", "shipping"},
	}, Options{OutOfScopeLabel: "oos", Threshold: 0.6})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ text, want string }{
		{"please refund the order", "refund"},
		{"track the parcel", "shipping"},
		{"what is the weather", "oos"},
	} {
		t.Run(tc.text, func(t *testing.T) {
			if got := m.Classify(tc.text); got.Label != tc.want {
				t.Errorf("Classify(%q) = %+v, want %s", tc.text, got, tc.want)
			}
		})
	}
	if _, err := Train(nil, Options{}); err == nil {
		t.Error("Train(nil) succeeded")
	}
}
