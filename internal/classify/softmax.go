package classify

import (
	"math"
	"math/rand/v2"
)

// The training hyper-parameters, picked on the CLINC150 val split and a
// held-out part of Banking77 train (docs/benchmarks.md, "Intent detection").
// Constants: a change is measured with the experiment harness (build tag
// experiment, experiment_test.go) and committed with its numbers.
const (
	trainEpochs = 8
	learnRate   = 3.0  // the initial step, decayed linearly to lrFloor·learnRate
	l2Lambda    = 1e-6 // L2 penalty per example step
	minDocFreq  = 2    // a feature must occur in this many training texts
)

// lrFloor keeps the last steps from vanishing entirely.
const lrFloor = 0.02

// gradEps skips classes whose gradient is negligible: most of a fitted
// softmax's mass is on a few labels, so updates touch few weights.
const gradEps = 1e-4

// dataset is a CSR matrix of example vectors with their label indices.
type dataset struct {
	start []int // row i is feats[start[i]:start[i+1]]
	feats []feat
	y     []int
}

func (d *dataset) len() int         { return len(d.y) }
func (d *dataset) row(i int) []feat { return d.feats[d.start[i]:d.start[i+1]] }
func (d *dataset) add(x []feat, y int) {
	if len(d.start) == 0 {
		d.start = append(d.start, 0)
	}
	d.feats = append(d.feats, x...)
	d.start = append(d.start, len(d.feats))
	d.y = append(d.y, y)
}

// subset returns the rows at idx, in that order.
func (d *dataset) subset(idx []int) *dataset {
	out := &dataset{}
	for _, i := range idx {
		out.add(d.row(i), d.y[i])
	}
	return out
}

// linear is a multinomial logistic regression: scores = x·W + b, weights
// laid out feature-major so one feature's class weights are contiguous.
type linear struct {
	k int
	w []float32
	b []float32
}

// scores writes x·W + b into z; acc is scratch of len k.
func (l *linear) scores(z []float64, acc []float32, x []feat) {
	dot(acc, l.w, l.k, x)
	for c := range z {
		z[c] = float64(acc[c]) + float64(l.b[c])
	}
}

// dot writes x·W into acc (len k): the hot loop of training and
// classification, in float32 and unrolled by four.
func dot(acc []float32, w []float32, k int, x []feat) {
	clear(acc)
	for _, f := range x {
		row := w[int(f.idx)*k : int(f.idx+1)*k : int(f.idx+1)*k]
		v := f.val
		a := acc[:len(row)]
		c := 0
		for ; c+4 <= len(row); c += 4 {
			r := row[c : c+4 : c+4]
			o := a[c : c+4 : c+4]
			o[0] += v * r[0]
			o[1] += v * r[1]
			o[2] += v * r[2]
			o[3] += v * r[3]
		}
		for ; c < len(row); c++ {
			a[c] += v * row[c]
		}
	}
}

// trainSoftmax fits a linear softmax model with plain SGD: examples in a
// seeded shuffle per epoch, a linearly decaying step, and L2 decay through
// a global weight scale so each step only touches the example's features.
// It is deterministic for a given seed.
func trainSoftmax(d *dataset, nFeat, k int, seed uint64) *linear {
	w := make([]float32, nFeat*k)
	b := make([]float32, k)
	scale := 1.0
	rng := rand.New(rand.NewPCG(seed, 0x636c617373696679))
	order := make([]int, d.len())
	for i := range order {
		order[i] = i
	}
	z := make([]float64, k)
	acc := make([]float32, k)
	active := make([]int, 0, k)
	total := float64(trainEpochs * d.len())
	step := 0
	for range trainEpochs {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, i := range order {
			lr := learnRate * math.Max(1-float64(step)/total, lrFloor)
			step++
			x := d.row(i)
			dot(acc, w, k, x)
			for c := range z {
				z[c] = float64(acc[c])*scale + float64(b[c])
			}
			softmaxInPlace(z)
			z[d.y[i]] -= 1 // z is now the gradient p - y
			scale *= 1 - lr*l2Lambda
			active = active[:0]
			for c, gc := range z {
				if gc > gradEps || gc < -gradEps {
					active = append(active, c)
					b[c] -= float32(lr * gc)
				}
			}
			for _, f := range x {
				row := w[int(f.idx)*k : int(f.idx+1)*k]
				g := lr * float64(f.val) / scale
				for _, c := range active {
					row[c] -= float32(g * z[c])
				}
			}
			if scale < 1e-3 {
				for j := range w {
					w[j] *= float32(scale)
				}
				scale = 1
			}
		}
	}
	for j := range w {
		w[j] *= float32(scale)
	}
	return &linear{k: k, w: w, b: b}
}

// softmaxInPlace turns scores into probabilities.
func softmaxInPlace(z []float64) {
	m := math.Inf(-1)
	for _, v := range z {
		m = math.Max(m, v)
	}
	sum := 0.0
	for i, v := range z {
		z[i] = math.Exp(v - m)
		sum += z[i]
	}
	for i := range z {
		z[i] /= sum
	}
}

// fitTemperature returns the T that minimises the negative log-likelihood
// of softmax(z/T) over held-out score vectors (temperature scaling), by
// golden-section search on ln T in [ln 0.25, ln 20]. The floor stops a
// held-out set the model gets all right from sharpening without limit.
func fitTemperature(logits [][]float64, y []int) float64 {
	if len(logits) == 0 {
		return 1
	}
	nll := func(lnT float64) float64 {
		t := math.Exp(lnT)
		s := 0.0
		for i, z := range logits {
			m := math.Inf(-1)
			for _, v := range z {
				m = math.Max(m, v/t)
			}
			sum := 0.0
			for _, v := range z {
				sum += math.Exp(v/t - m)
			}
			s += math.Log(sum) + m - z[y[i]]/t
		}
		return s
	}
	lo, hi := math.Log(0.25), math.Log(20)
	phi := (math.Sqrt(5) - 1) / 2
	a, b := hi-phi*(hi-lo), lo+phi*(hi-lo)
	fa, fb := nll(a), nll(b)
	for range 40 { // the bracket shrinks to 0.618^40 of ln 80: far below any effect
		if fa < fb {
			hi, b, fb = b, a, fa
			a = hi - phi*(hi-lo)
			fa = nll(a)
		} else {
			lo, a, fa = a, b, fb
			b = lo + phi*(hi-lo)
			fb = nll(b)
		}
	}
	return math.Exp((lo + hi) / 2)
}
