package bundle

import (
	"errors"
	"io"
	"runtime"
	"sync"
)

// orderedBatch is how many items one worker of decodeRecycled decodes at a
// time.
const orderedBatch = 256

// errStop, from use, ends decodeRecycled early without an error.
var errStop = errors.New("stop")

// decodeRecycled reads raw items with next (one after another, until it
// returns io.EOF or another error, an item possibly with it), decodes them
// on all cores with decode, and hands each decoded item to use in the
// order read: the JSON decoding of a big file, which is most of reading
// it, spreads over the cores while the items stay in order. At most a few
// batches are held at once. It returns next's error (not io.EOF) or
// use's (not errStop).
//
// use must keep nothing of the raw bytes or of the item it is handed once
// it returns (it copies what it keeps): the batches' buffers are used
// again, and a file of gigabytes is decoded through a few megabytes of
// them instead of allocating its size again in garbage.
func decodeRecycled[T any](next func() ([]byte, error), decode func(raw []byte, out *T), use func(*T) error) error {
	workers := runtime.GOMAXPROCS(0)
	type batch struct {
		buf  []byte
		ends []int
		out  []T
		done chan struct{}
	}
	work := make(chan *batch, workers)
	order := make(chan *batch, 2*workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for b := range work {
				if cap(b.out) >= len(b.ends) {
					b.out = b.out[:len(b.ends)]
					clear(b.out)
				} else {
					b.out = make([]T, len(b.ends))
				}
				start := 0
				for i, e := range b.ends {
					decode(b.buf[start:e], &b.out[i])
					start = e
				}
				close(b.done)
			}
		})
	}
	var stopped sync.Once
	stop := make(chan struct{})
	useErr := make(chan error, 1)
	free := make(chan *batch, 3*workers)
	go func() {
		var err error
		for b := range order {
			<-b.done
			for i := 0; err == nil && i < len(b.out); i++ {
				err = use(&b.out[i])
			}
			select {
			case free <- b:
			default:
			}
			if err != nil {
				stopped.Do(func() { close(stop) })
			}
		}
		useErr <- err
	}()
	newBatch := func() *batch {
		select {
		case b := <-free:
			b.buf, b.ends, b.done = b.buf[:0], b.ends[:0], make(chan struct{})
			return b
		default:
			return &batch{done: make(chan struct{})}
		}
	}
	var readErr error
	b := newBatch()
read:
	for {
		raw, err := next()
		if raw != nil {
			b.buf = append(b.buf, raw...)
			b.ends = append(b.ends, len(b.buf))
		}
		if len(b.ends) == orderedBatch || (err != nil && len(b.ends) > 0) {
			select {
			case order <- b:
			case <-stop:
				break read
			}
			work <- b
			b = newBatch()
		}
		if err != nil {
			if err != io.EOF {
				readErr = err
			}
			break
		}
		select {
		case <-stop:
			break read
		default:
		}
	}
	close(work)
	close(order)
	wg.Wait()
	err := <-useErr
	switch {
	case err != nil && err != errStop:
		return err
	case err == errStop:
		return nil
	}
	return readErr
}
