/* h5_lock.h - HDF5 from more than one thread: the loader's readers, the
 * background checkpoint writer and the main thread's validation reads.
 *
 * A thread-safe HDF5 build (Debian's is) serialises its own API calls, and
 * ds_h5_lock is then a no-op. A build without thread safety must never be
 * entered by two threads at once: every HDF5 use off the start-up path
 * takes ds_h5_lock, a process-wide mutex. DSTRAIN_H5_SERIALIZE=1 takes the
 * lock whatever the build (to test that path). */
#ifndef DS_H5_LOCK_H
#define DS_H5_LOCK_H

/* 1: the HDF5 library is thread-safe and no lock is taken; 0: serialised. */
int ds_h5_threadsafe(void);
/* One line for a run's banner: "HDF5 1.10.8, thread-safe" or "..., not
 * thread-safe: its calls are serialised by a lock" into buf [cap]. */
const char *ds_h5_thread_mode(char *buf, unsigned long cap);
void ds_h5_lock(void);
void ds_h5_unlock(void);

#endif
