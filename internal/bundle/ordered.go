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
	r := &recycler[T]{
		work:   make(chan *recycledBatch[T], workers),
		order:  make(chan *recycledBatch[T], 2*workers),
		free:   make(chan *recycledBatch[T], 3*workers),
		stop:   make(chan struct{}),
		useErr: make(chan error, 1),
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { r.decodeBatches(decode) })
	}
	go r.useInOrder(use)
	readErr := r.read(next)
	close(r.work)
	close(r.order)
	wg.Wait()
	err := <-r.useErr
	switch {
	case err != nil && err != errStop:
		return err
	case err == errStop:
		return nil
	}
	return readErr
}

// recycledBatch is a batch of decodeRecycled's items: their raw bytes one
// after another in buf, each ending at its ends, decoded into out; done
// closes once they are.
type recycledBatch[T any] struct {
	buf  []byte
	ends []int
	out  []T
	done chan struct{}
}

// recycler is decodeRecycled's batches on their way: to the workers
// (work), to use in the order read (order), and back to be read into
// again (free); stop closes when use has failed, and useErr gets its
// error (nil where it took every item).
type recycler[T any] struct {
	work, order, free chan *recycledBatch[T]
	stop              chan struct{}
	stopped           sync.Once
	useErr            chan error
}

// decodeBatches is a worker: it decodes each batch it takes from work
// into its out (reused where it is large enough, cleared) and closes its
// done.
func (r *recycler[T]) decodeBatches(decode func(raw []byte, out *T)) {
	for b := range r.work {
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
}

// useInOrder hands use each batch's items as it is decoded, in the order
// read, until use fails (then it stops the reading and takes no more);
// each batch used goes back to free, where there is room. Its error goes
// to useErr once order closes.
func (r *recycler[T]) useInOrder(use func(*T) error) {
	var err error
	for b := range r.order {
		<-b.done
		for i := 0; err == nil && i < len(b.out); i++ {
			err = use(&b.out[i])
		}
		select {
		case r.free <- b:
		default:
		}
		if err != nil {
			r.stopped.Do(func() { close(r.stop) })
		}
	}
	r.useErr <- err
}

// newBatch is a batch to read into: a free one emptied, or a new one.
func (r *recycler[T]) newBatch() *recycledBatch[T] {
	select {
	case b := <-r.free:
		b.buf, b.ends, b.done = b.buf[:0], b.ends[:0], make(chan struct{})
		return b
	default:
		return &recycledBatch[T]{done: make(chan struct{})}
	}
}

// read reads items with next into batches of orderedBatch, each sent to
// order and then to the workers, until next ends or stop closes; it
// returns next's error (nil for io.EOF or a stop).
func (r *recycler[T]) read(next func() ([]byte, error)) error {
	b := r.newBatch()
	for {
		raw, err := next()
		if raw != nil {
			b.buf = append(b.buf, raw...)
			b.ends = append(b.ends, len(b.buf))
		}
		if len(b.ends) == orderedBatch || (err != nil && len(b.ends) > 0) {
			select {
			case r.order <- b:
			case <-r.stop:
				return nil
			}
			r.work <- b
			b = r.newBatch()
		}
		if err != nil {
			if err != io.EOF {
				return err
			}
			return nil
		}
		select {
		case <-r.stop:
			return nil
		default:
		}
	}
}
