/* A fake NVML (libnvidia-ml.so.1) for the `profile run` end-to-end tests: one GPU, readings
 * made up, loaded through DQNGPU_NVML_LIB. Environment:
 *   FAKE_NVML_PIDS_FILE  lines "PID MIB": the compute processes listed (MIB 999999 = not
 *                        available); unset: the driver lists no processes (not supported)
 *   FAKE_NVML_FAIL_AFTER the utilisation query fails (GPU lost) after this many calls
 *   FAKE_NVML_DELAY_MS   each utilisation query takes this long
 *   FAKE_NVML_LOG        each utilisation query appends its call number to this file
 * Built by the tests with `cc -shared -fPIC`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } mem2;
typedef struct { unsigned int gpu, memory; } util_t;
typedef struct { unsigned int pid; unsigned long long used; unsigned int gi, ci; } proc_t;
static int calls = 0;
static int dev = 1;
int nvmlInit_v2(void) { return 0; }
int nvmlInitWithFlags(unsigned f) { return 0; }
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int r) { return "fake error"; }
int nvmlDeviceGetCount_v2(unsigned *c) { *c = 1; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **d) { *d = &dev; return 0; }
int nvmlDeviceGetMemoryInfo_v2(void *d, mem2 *m) { m->total = 40960ULL<<20; m->used = 1000ULL<<20; m->free = m->total - m->used; m->reserved = 0; return 0; }
int nvmlDeviceGetName(void *d, char *name, unsigned len) { snprintf(name, len, "NVIDIA A100-SXM4-40GB"); return 0; }
int nvmlDeviceGetUtilizationRates(void *d, util_t *u) {
  calls++;
  const char *fa = getenv("FAKE_NVML_FAIL_AFTER");
  if (fa && calls > atoi(fa)) return 15; /* GPU lost */
  const char *dl = getenv("FAKE_NVML_DELAY_MS");
  if (dl) usleep(atoi(dl) * 1000);
  const char *log = getenv("FAKE_NVML_LOG");
  if (log) { FILE *f = fopen(log, "a"); if (f) { fprintf(f, "%d\n", calls); fclose(f);} }
  u->gpu = calls % 101; u->memory = 0; return 0;
}
int nvmlDeviceGetComputeRunningProcesses_v3(void *d, unsigned *count, proc_t *infos) {
  const char *pf = getenv("FAKE_NVML_PIDS_FILE");
  if (!pf) return 3; /* not supported */
  proc_t tmp[64]; unsigned n = 0; FILE *f = fopen(pf, "r");
  if (f) { unsigned pid; unsigned long long mib; while (n < 64 && fscanf(f, "%u %llu", &pid, &mib) == 2) { tmp[n].pid = pid; tmp[n].used = (mib == 999999ULL) ? ~0ULL : (mib << 20); tmp[n].gi = tmp[n].ci = 0; n++; } fclose(f); }
  if (!infos || *count < n) { *count = n; return n ? 7 : 0; }
  memcpy(infos, tmp, n * sizeof(proc_t)); *count = n; return 0;
}
int nvmlDeviceGetGraphicsRunningProcesses_v3(void *d, unsigned *count, proc_t *infos) { *count = 0; return 0; }
