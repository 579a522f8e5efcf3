/* A fake libnvidia-ml.so.1: the NVML C functions aonkit's sampler reaches through nvidia-ml-py, over simulated GPUs.
 *
 * Built by tests/fake_libnvml/__init__.py (cc -shared, soname libnvidia-ml.so.1). A process that loads it
 * before pynvml does (or finds it first on LD_LIBRARY_PATH) runs pynvml's real ctypes code over these functions:
 * argument and struct layouts, version fields and error codes are those of nvml.h. Values follow the same
 * formulas as tests/fake_nvml.py (i: GPU index, k: utilization reads of that GPU) so tests can tell channels apart.
 *
 * Configuration, read at nvmlInit: AONKIT_FAKE_NVML_GPUS (default 8), AONKIT_FAKE_NVML_HOPPER (1: GPM, default 1),
 * AONKIT_FAKE_NVML_NVLINKS (active links per GPU, default 4), AONKIT_FAKE_NVML_LOST_AFTER (utilization reads after
 * which GPU 0 is lost; default never), AONKIT_FAKE_NVML_PROCESSES ("pid:bytes,pid:bytes" on every GPU),
 * AONKIT_FAKE_NVML_CALL_NS (busy-wait this long in every device call, standing in for the driver; default 0),
 * AONKIT_FAKE_NVML_NO_DRIVER (1: nvmlInit fails as it does without a driver), AONKIT_FAKE_NVML_DRIVER_FILE (a path:
 * nvmlInit fails so while no file is there, as before the kernel module is loaded), AONKIT_FAKE_NVML_UPGRADE_FILE (a
 * path: when it appears after this library was loaded, nvmlInit fails with LIB_RM_VERSION_MISMATCH, as after a driver
 * upgrade; a process that loads the library after it appeared starts normally), AONKIT_FAKE_NVML_FLAKY ("clock:from:count" or
 * "power:from:count": GPU 1's SM clock read, or its instant power field, fails with NVML_ERROR_UNKNOWN while
 * from <= k < from + count), AONKIT_FAKE_NVML_MIG ("gi:ci,gi:ci": GPU 0 is in MIG mode with these MIG devices; its
 * utilization is then not supported, as on a real GPU in MIG mode).
 * aonkitFakeCalls() returns how many NVML calls were made; aonkitFakeTicks(i), aonkitFakeGpmTicks(i) and
 * aonkitFakeFieldReads(i) GPU i's counters, aonkitFakeMigGpmTicks(gi) GPU 0's instance gi's, for tests.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SUCCESS 0
#define ERR_UNINITIALIZED 1
#define ERR_INVALID_ARGUMENT 2
#define ERR_NOT_SUPPORTED 3
#define ERR_NOT_FOUND 6
#define ERR_INSUFFICIENT_SIZE 7
#define ERR_DRIVER_NOT_LOADED 9
#define ERR_GPU_IS_LOST 15
#define ERR_LIB_RM_VERSION_MISMATCH 18
#define ERR_UNKNOWN 999

#define MAX_GPUS 64
#define MAX_PROCS 16
#define GIB (1ULL << 30)
#define MIB (1ULL << 20)

typedef struct {
    unsigned index, ticks, gpm_ticks, field_reads, lost;
} gpu_t;

typedef struct { unsigned gpu, memory; } utilization_t;
typedef struct { unsigned long long total, free, used; } memory_t;
typedef struct { unsigned version, sensorType; int temperature; } temperature_v1_t;
typedef union { double dVal; unsigned uiVal; unsigned long ulVal; unsigned long long ullVal; long long sllVal; } value_t;
typedef struct {
    unsigned fieldId, scopeId;
    long long timestamp, latencyUsec;
    unsigned valueType, nvmlReturn;
    value_t value;
} field_value_t;
typedef struct { unsigned pid; unsigned long long usedGpuMemory; unsigned gpuInstanceId, computeInstanceId; } process_v3_t;
typedef struct { unsigned version, isSupportedDevice; } gpm_support_t;
typedef struct { gpu_t *gpu; unsigned k, gi; } gpm_sample_t;
typedef struct { unsigned gi, ci, gpm_ticks, memory_reads; } mig_t; /* a MIG device of GPU 0 (its handle) */
typedef struct { const char *shortName, *longName, *unit; } metric_info_t;
typedef struct { unsigned metricId, nvmlReturn; double value; metric_info_t metricInfo; } gpm_metric_t;
typedef struct {
    unsigned version, numMetrics;
    gpm_sample_t *sample1, *sample2;
    gpm_metric_t metrics[477];
} gpm_metrics_get_t;

static gpu_t gpus[MAX_GPUS];
static unsigned n_gpus, hopper = 1, nvlinks = 4, initialized;
static long lost_after = -1, flaky_from = -1, flaky_count;
static int flaky_power; /* 1: the power field is flaky, 0: the SM clock */
static long long call_ns;
static unsigned n_procs, proc_pid[MAX_PROCS];
static unsigned long long proc_bytes[MAX_PROCS];
static unsigned long long calls;
#define MAX_MIG 7
static mig_t migs[MAX_MIG];
static unsigned n_migs, mig_mode;

static long env_long(const char *name, long dflt) {
    const char *s = getenv(name);
    return s && *s ? strtol(s, NULL, 10) : dflt;
}

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* every device call: counted, the driver's time spent, a lost GPU refused */
static int enter(gpu_t *g) {
    calls++;
    if (call_ns > 0) {
        long long until = now_ns() + call_ns;
        while (now_ns() < until) {
        }
    }
    if (!initialized) return ERR_UNINITIALIZED;
    if (g == NULL || g < gpus || g >= gpus + n_gpus) return ERR_INVALID_ARGUMENT;
    return g->lost ? ERR_GPU_IS_LOST : SUCCESS;
}

/* GPU 1's SM clock (power 0) or instant power field (power 1) in its flaky reads (AONKIT_FAKE_NVML_FLAKY) */
static int flaky(const gpu_t *g, int power) {
    long k = (long)g->ticks;
    return g->index == 1 && power == flaky_power && flaky_from >= 0 && k >= flaky_from && k < flaky_from + flaky_count;
}

unsigned long long aonkitFakeCalls(void) { return calls; }
/* GPU i's utilization reads (k of the formulas), GPM snapshots and field-value reads so far; -1 for no such GPU */
long aonkitFakeTicks(unsigned i) { return i < n_gpus ? (long)gpus[i].ticks : -1; }
long aonkitFakeGpmTicks(unsigned i) { return i < n_gpus ? (long)gpus[i].gpm_ticks : -1; }
long aonkitFakeFieldReads(unsigned i) { return i < n_gpus ? (long)gpus[i].field_reads : -1; }
long aonkitFakeMigGpmTicks(unsigned gi);  /* GPU 0's instance gi's snapshots; -1 for no such instance */

static int upgraded_at_load = -1;  /* whether AONKIT_FAKE_NVML_UPGRADE_FILE existed when the library was loaded */

__attribute__((constructor)) static void at_load(void) {
    const char *f = getenv("AONKIT_FAKE_NVML_UPGRADE_FILE");
    upgraded_at_load = f && *f && access(f, F_OK) == 0;
}

int nvmlInitWithFlags(unsigned flags) {
    (void)flags;
    calls++;
    if (env_long("AONKIT_FAKE_NVML_NO_DRIVER", 0)) return ERR_DRIVER_NOT_LOADED;
    const char *driver = getenv("AONKIT_FAKE_NVML_DRIVER_FILE");
    if (driver && *driver && access(driver, F_OK) != 0) return ERR_DRIVER_NOT_LOADED;
    const char *upgrade = getenv("AONKIT_FAKE_NVML_UPGRADE_FILE");
    if (upgrade && *upgrade && !upgraded_at_load && access(upgrade, F_OK) == 0) return ERR_LIB_RM_VERSION_MISMATCH;
    if (!initialized) {
        long n = env_long("AONKIT_FAKE_NVML_GPUS", 8);
        n_gpus = n < 0 ? 0 : n > MAX_GPUS ? MAX_GPUS : (unsigned)n;
        hopper = (unsigned)env_long("AONKIT_FAKE_NVML_HOPPER", 1);
        nvlinks = (unsigned)env_long("AONKIT_FAKE_NVML_NVLINKS", 4);
        lost_after = env_long("AONKIT_FAKE_NVML_LOST_AFTER", -1);
        const char *fl = getenv("AONKIT_FAKE_NVML_FLAKY");
        if (fl && (strncmp(fl, "clock:", 6) == 0 || strncmp(fl, "power:", 6) == 0)) {
            char *end;
            flaky_power = fl[0] == 'p';
            flaky_from = strtol(fl + 6, &end, 10);
            flaky_count = *end == ':' ? strtol(end + 1, NULL, 10) : 1;
        }
        call_ns = env_long("AONKIT_FAKE_NVML_CALL_NS", 0);
        memset(gpus, 0, sizeof gpus);
        for (unsigned i = 0; i < n_gpus; i++) gpus[i].index = i;
        n_migs = 0;
        memset(migs, 0, sizeof migs);
        const char *mg = getenv("AONKIT_FAKE_NVML_MIG");
        mig_mode = mg && *mg;
        while (mg && *mg && n_migs < MAX_MIG) {
            char *end;
            migs[n_migs].gi = (unsigned)strtoul(mg, &end, 10);
            if (*end != ':') break;
            migs[n_migs++].ci = (unsigned)strtoul(end + 1, &end, 10);
            mg = *end == ',' ? end + 1 : end;
        }
        n_procs = 0;
        const char *p = getenv("AONKIT_FAKE_NVML_PROCESSES");
        while (p && *p && n_procs < MAX_PROCS) {
            char *end;
            proc_pid[n_procs] = (unsigned)strtoul(p, &end, 10);
            if (*end != ':') break;
            proc_bytes[n_procs++] = strtoull(end + 1, &end, 10);
            p = *end == ',' ? end + 1 : end;
        }
    }
    initialized++;
    return SUCCESS;
}

int nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
int nvmlInit(void) { return nvmlInitWithFlags(0); }

int nvmlShutdown(void) {
    calls++;
    if (!initialized) return ERR_UNINITIALIZED;
    initialized--;
    return SUCCESS;
}

const char *nvmlErrorString(int result) {
    switch (result) {
    case SUCCESS: return "Success";
    case ERR_UNINITIALIZED: return "Uninitialized";
    case ERR_INVALID_ARGUMENT: return "Invalid Argument";
    case ERR_NOT_SUPPORTED: return "Not Supported";
    case ERR_NOT_FOUND: return "Not Found";
    case ERR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case ERR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case ERR_GPU_IS_LOST: return "GPU is lost";
    default: return "Unknown Error";
    }
}

int nvmlDeviceGetCount_v2(unsigned *count) {
    calls++;
    if (!initialized) return ERR_UNINITIALIZED;
    *count = n_gpus;
    return SUCCESS;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, gpu_t **device) {
    calls++;
    if (!initialized) return ERR_UNINITIALIZED;
    if (index >= n_gpus) return ERR_INVALID_ARGUMENT;
    *device = &gpus[index];
    return gpus[index].lost ? ERR_GPU_IS_LOST : SUCCESS;
}

int nvmlDeviceGetName(gpu_t *g, char *name, unsigned length) {
    int r = enter(g);
    if (r) return r;
    const char *s = hopper ? "Fake H100 (C)" : "Fake A100 (C)";
    if (length < strlen(s) + 1) return ERR_INSUFFICIENT_SIZE;
    strcpy(name, s);
    return SUCCESS;
}

/* gpu = (10 i + k) % 101, memory = (5 i + k) % 101; GPU 0 is lost after AONKIT_FAKE_NVML_LOST_AFTER reads */
int nvmlDeviceGetUtilizationRates(gpu_t *g, utilization_t *u) {
    int r = enter(g);
    if (r) return r;
    if (mig_mode && g->index == 0) return ERR_NOT_SUPPORTED;
    g->ticks++;
    if (lost_after >= 0 && g->index == 0 && g->ticks > (unsigned long)lost_after) {
        g->lost = 1;
        return ERR_GPU_IS_LOST;
    }
    u->gpu = (10 * g->index + g->ticks) % 101;
    u->memory = (5 * g->index + g->ticks) % 101;
    return SUCCESS;
}

static mig_t *as_mig(const void *h) {
    const mig_t *m = h;
    return m >= migs && m < migs + n_migs ? (mig_t *)m : NULL;
}

/* used = (i + 1) GiB + k MiB of 80 GiB; a MIG device's: gi GiB + its reads MiB of 10 gi GiB */
int nvmlDeviceGetMemoryInfo(gpu_t *g, memory_t *m) {
    mig_t *mig = as_mig(g);
    if (mig) {
        int r = enter(&gpus[0]);
        if (r) return r;
        m->total = 10ULL * mig->gi * GIB;
        m->used = mig->gi * GIB + ++mig->memory_reads * MIB;
        m->free = m->total - m->used;
        return SUCCESS;
    }
    int r = enter(g);
    if (r) return r;
    m->total = 80 * GIB;
    m->used = (g->index + 1) * GIB + g->ticks * MIB;
    m->free = m->total - m->used;
    return SUCCESS;
}

/* MIG: GPU 0 only (AONKIT_FAKE_NVML_MIG); the handles of its MIG devices point into migs[] */
int nvmlDeviceGetMigMode(gpu_t *g, unsigned *current, unsigned *pending) {
    int r = enter(g);
    if (r) return r;
    *current = *pending = mig_mode && g->index == 0;
    return SUCCESS;
}

int nvmlDeviceGetMaxMigDeviceCount(gpu_t *g, unsigned *count) {
    int r = enter(g);
    if (r) return r;
    *count = MAX_MIG;
    return SUCCESS;
}

int nvmlDeviceGetMigDeviceHandleByIndex(gpu_t *g, unsigned index, mig_t **mig) {
    int r = enter(g);
    if (r) return r;
    if (!mig_mode || g->index != 0) return ERR_INVALID_ARGUMENT;
    if (index >= n_migs) return ERR_NOT_FOUND;
    *mig = &migs[index];
    return SUCCESS;
}

int nvmlDeviceGetGpuInstanceId(const void *h, unsigned *id) {
    calls++;
    mig_t *m = as_mig(h);
    if (!m) return ERR_INVALID_ARGUMENT;
    *id = m->gi;
    return SUCCESS;
}

int nvmlDeviceGetComputeInstanceId(const void *h, unsigned *id) {
    calls++;
    mig_t *m = as_mig(h);
    if (!m) return ERR_INVALID_ARGUMENT;
    *id = m->ci;
    return SUCCESS;
}

/* "GPU-fake-c-<i>", "MIG-fake-c-0-<gi>-<ci>" */
int nvmlDeviceGetUUID(gpu_t *g, char *uuid, unsigned length) {
    char s[64];
    mig_t *m = as_mig(g);
    if (m) {
        calls++;
        snprintf(s, sizeof s, "MIG-fake-c-0-%u-%u", m->gi, m->ci);
    } else {
        int r = enter(g);
        if (r) return r;
        snprintf(s, sizeof s, "GPU-fake-c-%u", g->index);
    }
    if (length < strlen(s) + 1) return ERR_INSUFFICIENT_SIZE;
    strcpy(uuid, s);
    return SUCCESS;
}

int nvmlDeviceGetPowerUsage(gpu_t *g, unsigned *mw) {
    int r = enter(g);
    if (r) return r;
    *mw = 100000 + 1000 * g->index;
    return SUCCESS;
}

int nvmlDeviceGetTotalEnergyConsumption(gpu_t *g, unsigned long long *mj) {
    int r = enter(g);
    if (r) return r;
    *mj = (g->index + 1) * 1000000ULL + 10000ULL * g->ticks;
    return SUCCESS;
}

int nvmlDeviceGetClockInfo(gpu_t *g, int type, unsigned *mhz) {
    int r = enter(g);
    if (r) return r;
    if (type == 1 && flaky(g, 0)) return ERR_UNKNOWN;
    *mhz = type == 1 ? 1980 - g->index : 2619; /* NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 */
    return SUCCESS;
}

int nvmlDeviceGetTemperatureV(gpu_t *g, temperature_v1_t *t) {
    int r = enter(g);
    if (r) return r;
    if (t->version != (1u << 24 | sizeof *t)) return 25; /* NVML_ERROR_ARGUMENT_VERSION_MISMATCH */
    t->temperature = 40 + (int)g->index;
    return SUCCESS;
}

int nvmlDeviceGetTemperature(gpu_t *g, int sensor, unsigned *c) {
    int r = enter(g);
    (void)sensor;
    if (r) return r;
    *c = 41 + g->index;
    return SUCCESS;
}

int nvmlDeviceGetCurrentClocksEventReasons(gpu_t *g, unsigned long long *mask) {
    int r = enter(g);
    if (r) return r;
    *mask = 4; /* nvmlClocksEventReasonSwPowerCap */
    return SUCCESS;
}

int nvmlDeviceGetCurrentClocksThrottleReasons(gpu_t *g, unsigned long long *mask) {
    int r = enter(g);
    if (r) return r;
    *mask = 4 | 8; /* SwPowerCap | HwSlowdown */
    return SUCCESS;
}

int nvmlDeviceGetPcieThroughput(gpu_t *g, int counter, unsigned *kbs) {
    int r = enter(g);
    if (r) return r;
    *kbs = counter == 0 ? 2000 : 1000;
    return SUCCESS;
}

int nvmlDeviceGetNvLinkState(gpu_t *g, unsigned link, int *active) {
    int r = enter(g);
    if (r) return r;
    if (nvlinks == 0) return ERR_NOT_SUPPORTED;
    if (link >= nvlinks) return ERR_INVALID_ARGUMENT;
    *active = 1;
    return SUCCESS;
}

/* counters stepping with each read that asks for one, 0.1 s apart: PCIe TX 1 MB, RX 0.5 MB; NVLink TX 100, RX 50
 * KiB per link; instant power (field 186, on the Hopper fake only) (150 + i) W + k mW, an unsigned int */
int nvmlDeviceGetFieldValues(gpu_t *g, int n, field_value_t *v) {
    int r = enter(g);
    if (r) return r;
    int counters = 0;
    for (int j = 0; j < n; j++) counters |= v[j].fieldId != 186;
    unsigned long long k = counters ? ++g->field_reads : g->field_reads;
    for (int j = 0; j < n; j++) {
        unsigned id = v[j].fieldId;
        v[j].timestamp = 1700000000000000LL + 100000LL * (long long)k;
        v[j].latencyUsec = 0;
        if (id == 186) {
            v[j].valueType = 1; /* NVML_VALUE_TYPE_UNSIGNED_INT */
            v[j].nvmlReturn = !hopper ? ERR_NOT_SUPPORTED : flaky(g, 1) ? ERR_UNKNOWN : SUCCESS;
            v[j].value.ullVal = 0xA5A5A5A500000000ULL; /* the union's other bytes: NVML need not clear them */
            v[j].value.uiVal = hopper ? (150 + g->index) * 1000 + g->ticks : 0;
            continue;
        }
        unsigned long long step = id == 197 ? 1000000 : id == 198 ? 500000 : id == 138 ? 100 : id == 139 ? 50 : 0;
        int ok = step && ((id == 197 || id == 198) || v[j].scopeId < nvlinks);
        v[j].valueType = 3; /* NVML_VALUE_TYPE_UNSIGNED_LONG_LONG */
        v[j].nvmlReturn = ok ? SUCCESS : ERR_NOT_SUPPORTED;
        v[j].value.ullVal = ok ? step * k : 0;
    }
    return SUCCESS;
}

int nvmlDeviceGetComputeRunningProcesses_v3(gpu_t *g, unsigned *count, process_v3_t *infos) {
    int r = enter(g);
    if (r) return r;
    if (*count < n_procs || (infos == NULL && n_procs)) {
        *count = n_procs;
        return ERR_INSUFFICIENT_SIZE;
    }
    for (unsigned j = 0; j < n_procs; j++) {
        infos[j].pid = proc_pid[j];
        infos[j].usedGpuMemory = proc_bytes[j];
        infos[j].gpuInstanceId = infos[j].computeInstanceId = 0xFFFFFFFFu;
    }
    *count = n_procs;
    return SUCCESS;
}

int nvmlGpmQueryDeviceSupport(gpu_t *g, gpm_support_t *s) {
    int r = enter(g);
    if (r) return r;
    if (s->version != 1) return 25;
    s->isSupportedDevice = hopper;
    return SUCCESS;
}

int nvmlGpmSampleAlloc(gpm_sample_t **s) {
    calls++;
    *s = calloc(1, sizeof **s);
    return *s ? SUCCESS : ERR_UNKNOWN;
}

int nvmlGpmSampleFree(gpm_sample_t *s) {
    calls++;
    free(s);
    return SUCCESS;
}

int nvmlGpmSampleGet(gpu_t *g, gpm_sample_t *s) {
    int r = enter(g);
    if (r) return r;
    if (!hopper) return ERR_NOT_SUPPORTED;
    s->gpu = g;
    s->k = ++g->gpm_ticks;
    s->gi = 0;
    return SUCCESS;
}

long aonkitFakeMigGpmTicks(unsigned gi) {
    for (unsigned j = 0; j < n_migs; j++)
        if (migs[j].gi == gi) return (long)migs[j].gpm_ticks;
    return -1;
}

/* a snapshot of GPU 0's instance gi (its own count of snapshots) */
int nvmlGpmMigSampleGet(gpu_t *g, unsigned gi, gpm_sample_t *s) {
    int r = enter(g);
    if (r) return r;
    if (!hopper) return ERR_NOT_SUPPORTED;
    for (unsigned j = 0; mig_mode && g->index == 0 && j < n_migs; j++) {
        if (migs[j].gi != gi) continue;
        s->gpu = g;
        s->k = ++migs[j].gpm_ticks;  /* the instance's first MIG device keeps the count */
        s->gi = gi;
        return SUCCESS;
    }
    return ERR_NOT_FOUND;
}

/* each metric: the mean over snapshots k1 < t <= k2 of (id + 10 i + 3 gi + t) % 100 (tests/fake_nvml.py's gpm_value) */
int nvmlGpmMetricsGet(gpm_metrics_get_t *req) {
    gpm_sample_t *s1 = req->sample1, *s2 = req->sample2;
    if (req->version != 1 || !s1 || !s2 || s1->gpu != s2->gpu || s1->gi != s2->gi || s1->k >= s2->k ||
        req->numMetrics > 477)
        return ERR_INVALID_ARGUMENT;
    int r = enter(s2->gpu);
    if (r) return r;
    for (unsigned j = 0; j < req->numMetrics; j++) {
        gpm_metric_t *m = &req->metrics[j];
        double sum = 0;
        for (unsigned t = s1->k + 1; t <= s2->k; t++) sum += (m->metricId + 10 * s2->gpu->index + 3 * s2->gi + t) % 100;
        m->nvmlReturn = SUCCESS;
        m->value = sum / (s2->k - s1->k);
    }
    return SUCCESS;
}
