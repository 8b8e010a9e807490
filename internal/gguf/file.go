package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"runtime"
	"sync"

	"github.com/x448/float16"
)

// The GGUF v3 layout (ggml's docs/gguf.md), little-endian throughout:
//
//	"GGUF", version u32, tensor count u64, metadata count u64,
//	metadata: key (string), value type u32, value,
//	tensor infos: name (string), n_dims u32, dims u64[n_dims] (innermost
//	first), ggml type u32, data offset u64 (from the start of the data,
//	a multiple of the alignment),
//	zero padding to the alignment, then each tensor's data, each padded to
//	the alignment.
//
// A string is a u64 byte length and the bytes (no terminator); an array is
// the element type u32, the count u64 and the elements.

const (
	magic     = "GGUF"
	version   = 3
	Alignment = 32 // general.alignment, ggml's default
)

// Metadata value types.
const (
	typeUint32  = 4
	typeInt32   = 5
	typeFloat32 = 6
	typeBool    = 7
	typeString  = 8
	typeArray   = 9
)

// TensorType is a ggml tensor type; only the two unquantized float types
// are written.
type TensorType uint32

// The ggml types written.
const (
	F32 TensorType = 0
	F16 TensorType = 1
)

// Size is the byte size of one element.
func (t TensorType) Size() int64 {
	if t == F16 {
		return 2
	}
	return 4
}

func (t TensorType) String() string {
	if t == F16 {
		return "F16"
	}
	return "F32"
}

// KV is one metadata pair. Value is uint32, int32, float32, bool, string,
// []string or []int32.
type KV struct {
	Key   string
	Value any
}

// TensorInfo describes one tensor: Dims innermost first (a PyTorch weight
// of shape [out, in] has Dims {in, out}).
type TensorInfo struct {
	Name string
	Dims []uint64
	Type TensorType
}

// Elements is the number of elements.
func (t TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Bytes is the data size, before padding.
func (t TensorInfo) Bytes() int64 { return int64(t.Elements()) * t.Type.Size() }

func padding(n int64) int64 { return (Alignment - n%Alignment) % Alignment }

// encoder writes GGUF's primitives, counting bytes and keeping the first
// error.
type encoder struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (e *encoder) bytes(b []byte) {
	if e.err != nil {
		return
	}
	var n int
	n, e.err = e.w.Write(b)
	e.n += int64(n)
}

func (e *encoder) u32(v uint32) { e.bytes(binary.LittleEndian.AppendUint32(nil, v)) }
func (e *encoder) u64(v uint64) { e.bytes(binary.LittleEndian.AppendUint64(nil, v)) }

func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	e.bytes([]byte(s))
}

func (e *encoder) zeros(n int64) { e.bytes(make([]byte, n)) }

// kv writes one metadata pair.
func (e *encoder) kv(p KV) error {
	e.str(p.Key)
	switch v := p.Value.(type) {
	case uint32:
		e.u32(typeUint32)
		e.u32(v)
	case int32:
		e.u32(typeInt32)
		e.u32(uint32(v))
	case float32:
		e.u32(typeFloat32)
		e.u32(math.Float32bits(v))
	case bool:
		e.u32(typeBool)
		b := byte(0)
		if v {
			b = 1
		}
		e.bytes([]byte{b})
	case string:
		e.u32(typeString)
		e.str(v)
	case []string:
		e.u32(typeArray)
		e.u32(typeString)
		e.u64(uint64(len(v)))
		for _, s := range v {
			e.str(s)
		}
	case []int32:
		e.u32(typeArray)
		e.u32(typeInt32)
		e.u64(uint64(len(v)))
		buf := make([]byte, 0, 4*len(v))
		for _, x := range v {
			buf = binary.LittleEndian.AppendUint32(buf, uint32(x))
		}
		e.bytes(buf)
	default:
		return fmt.Errorf("gguf: metadata %s: value of type %T is not written", p.Key, p.Value)
	}
	return nil
}

// header writes everything before the tensor data (magic to the padding
// after the tensor infos) and returns the byte count.
func writeHeader(w *bufio.Writer, kvs []KV, tensors []TensorInfo) (int64, error) {
	e := &encoder{w: w}
	e.bytes([]byte(magic))
	e.u32(version)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(kvs)))
	for _, p := range kvs {
		if err := e.kv(p); err != nil {
			return e.n, err
		}
	}
	var offset int64
	for _, t := range tensors {
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(d)
		}
		e.u32(uint32(t.Type))
		e.u64(uint64(offset))
		offset += t.Bytes() + padding(t.Bytes())
	}
	e.zeros(padding(e.n))
	return e.n, e.err
}

// Fill produces one tensor's elements in order, as float32, into buf
// starting at element first; buf is never longer than what remains.
type Fill func(buf []float32, first uint64)

// Tensor is a tensor to write: its info and what fills it.
type Tensor struct {
	TensorInfo
	Fill Fill
}

// Encode writes a GGUF v3 file of kvs and tensors to w, generating each
// tensor's data in chunks as it goes, so no tensor is ever held whole. It
// returns the bytes written.
func Encode(w io.Writer, kvs []KV, tensors []Tensor) (int64, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	infos := make([]TensorInfo, len(tensors))
	for i, t := range tensors {
		infos[i] = t.TensorInfo
	}
	n, err := writeHeader(bw, kvs, infos)
	if err != nil {
		return n, err
	}
	for _, t := range tensors {
		written, err := writeData(bw, t)
		n += written
		if err != nil {
			return n, fmt.Errorf("gguf: tensor %s: %w", t.Name, err)
		}
		pad := padding(t.Bytes())
		if _, err := bw.Write(make([]byte, pad)); err != nil {
			return n, err
		}
		n += pad
	}
	return n, bw.Flush()
}

// chunkElems is how many elements are generated at a time; a Fill is called
// with element ranges that start at multiples of it, so what a seeded Fill
// makes does not depend on how many goroutines run.
const chunkElems = 1 << 16

// writeData generates t's chunks on every core and writes them in order.
func writeData(w io.Writer, t Tensor) (int64, error) {
	total := t.Elements()
	type job struct {
		first uint64
		out   chan []byte
	}
	jobs := make(chan job)
	pending := make(chan chan []byte, 2*runtime.GOMAXPROCS(0))
	stop := make(chan struct{})
	go func() {
		defer close(pending)
		defer close(jobs)
		for first := uint64(0); first < total; first += chunkElems {
			out := make(chan []byte, 1)
			select {
			case pending <- out:
			case <-stop:
				return
			}
			select {
			case jobs <- job{first, out}:
			case <-stop:
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for j := range jobs {
				j.out <- encodeChunk(t, j.first, min(chunkElems, total-j.first))
			}
		})
	}
	defer wg.Wait()
	var n int64
	for out := range pending {
		b := <-out
		if _, err := w.Write(b); err != nil {
			close(stop)
			return n, err
		}
		n += int64(len(b))
	}
	return n, nil
}

// encodeChunk fills n elements from first and encodes them as t's type.
func encodeChunk(t Tensor, first, n uint64) []byte {
	buf := make([]float32, n)
	t.Fill(buf, first)
	out := make([]byte, 0, int64(n)*t.Type.Size())
	for _, v := range buf {
		if t.Type == F16 {
			out = binary.LittleEndian.AppendUint16(out, float16.Fromfloat32(v).Bits())
		} else {
			out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
		}
	}
	return out
}
