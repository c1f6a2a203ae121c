"""BOINC's homogeneous redundancy classes of hosts (sched/hr.cpp), as plain functions of a
host's OS name, CPU vendor and CPU model, with BOINC's class numbers (an OS code, a multiple
of 128, plus a CPU code below 128), so classes compare across BOINC and boincweb. No Django:
the bench scripts draw cases with it. ``backend.daemons.sched_hr`` uses it to send work.
"""

from collections.abc import Iterable

FINE, COARSE = 1, 2

# hr.cpp's codes: an OS code (multiples of 128) plus a CPU code (below 128).
NO_CPU, INTEL, AMD, MACINTOSH, ARM = 1, 2, 3, 4, 22
AMD_ATHLON, AMD_DURON, AMD_SEMPRON, AMD_OPTERON, AMD_ATHLON64, AMD_ATHLON_XP = 5, 6, 7, 8, 9, 10
INTEL_XEON, INTEL_CELERON, INTEL_PENTIUM, INTEL_PENTIUM_II, INTEL_PENTIUM_III = 11, 12, 13, 14, 15
INTEL_PENTIUM_4, INTEL_PENTIUM_D, INTEL_PENTIUM_M, AMD_ATHLON_MP, AMD_TURION = 16, 17, 18, 19, 20
INTEL_CORE = 21
NO_OS, LINUX, WINDOWS, DARWIN, FREEBSD, ANDROID = 128, 256, 384, 512, 640, 768

# The OS named first in os_name, case-insensitively (hr.cpp os()).
OS_CODES = (("linux", LINUX), ("windows", WINDOWS), ("darwin", DARWIN), ("freebsd", FREEBSD), ("android", ANDROID))
# Intel models by the first family word in p_model, then the details that refine it.
INTEL_CELERON_KINDS = ((" m ", INTEL_PENTIUM_M), (" d ", INTEL_PENTIUM_D), ("iii", INTEL_PENTIUM_III))
INTEL_PENTIUM_KINDS = (
    ("iii", INTEL_PENTIUM_III),
    ("ii", INTEL_PENTIUM_II),
    (" 4 ", INTEL_PENTIUM_4),
    (" d ", INTEL_PENTIUM_D),
    (" m ", INTEL_PENTIUM_M),
)
# "x86 Family F Model M" strings of old clients, in the order they are tried.
INTEL_X86_KINDS = (
    ("family 6 model 6", INTEL_CELERON),
    ("family 6 model 9", INTEL_PENTIUM_M),
    ("family 6 model 10", INTEL_XEON),
    ("family 5 model 1", INTEL_PENTIUM),
    ("family 5 model 2", INTEL_PENTIUM),
    ("family 6 model 1", INTEL_PENTIUM),
    ("family 15 model 1", INTEL_PENTIUM_4),
    ("family 15 model 2", INTEL_PENTIUM_4),
    ("family 6 model 7", INTEL_PENTIUM_III),
    ("family 6 model 8", INTEL_PENTIUM_III),
    ("family 6 model 11", INTEL_PENTIUM_III),
    ("family 6 model 3", INTEL_PENTIUM_II),
    ("family 6 model 5", INTEL_PENTIUM_II),
)
AMD_KINDS = (("duron", AMD_DURON), ("opteron", AMD_OPTERON), ("sempron", AMD_SEMPRON), ("turion", AMD_TURION))
AMD_ATHLON_KINDS = (("xp", AMD_ATHLON_XP), ("mp", AMD_ATHLON_MP), ("64", AMD_ATHLON64))


def first_match(text: str, kinds: Iterable[tuple[str, int]], default: int) -> int:
    """The code of the first (substring, code) of ``kinds`` found in ``text``, else default."""
    return next((code for word, code in kinds if word in text), default)


def os_code(os_name: str | None) -> int:
    """hr.cpp os(): the OS part of a class."""
    return first_match((os_name or "").lower(), OS_CODES, NO_OS)


def cpu_coarse(vendor: str | None, model: str | None) -> int:
    """hr.cpp cpu_coarse(): the CPU vendor, AMD counted as Intel; ARM also by the model
    (case-sensitively, as BOINC: some clients leave p_vendor blank)."""
    vendor = (vendor or "").lower()
    if "intel" in vendor or "amd" in vendor:
        return INTEL
    if "macintosh" in vendor:
        return MACINTOSH
    if "arm" in vendor or "ARM" in (model or ""):
        return ARM
    return NO_CPU


def cpu_fine(vendor: str | None, model: str | None) -> int:
    """hr.cpp cpu_fine(): the CPU model family."""
    vendor, model = (vendor or "").lower(), (model or "").lower()
    if "intel" in vendor:
        if "xeon" in model:
            return INTEL_XEON
        if "celeron" in model:
            return first_match(model, INTEL_CELERON_KINDS, INTEL_CELERON)
        if "core" in model:
            return INTEL_CORE
        if "pentium" in model:
            return first_match(model, INTEL_PENTIUM_KINDS, INTEL_PENTIUM)
        if "x86" in model:
            return first_match(model, INTEL_X86_KINDS, INTEL)
        return INTEL
    if "amd" in vendor:
        if "athlon" in model and not any(word in model for word, _ in AMD_KINDS):
            return first_match(model, AMD_ATHLON_KINDS, AMD_ATHLON)
        return first_match(model, AMD_KINDS, AMD)
    if "macintosh" in vendor:
        return MACINTOSH
    if "arm" in vendor:
        return ARM
    return NO_CPU


def hr_class(os_name: str | None, vendor: str | None, model: str | None, hr_type: int) -> int:
    """hr.cpp hr_class(): the host's class in HR type ``hr_type`` (0 for no HR)."""
    if hr_type == FINE:
        return os_code(os_name) + cpu_fine(vendor, model)
    if hr_type == COARSE:
        return os_code(os_name) + cpu_coarse(vendor, model)
    return 0


def hr_unknown_class(os_name: str | None, vendor: str | None, model: str | None, hr_type: int) -> bool:
    """hr.cpp hr_unknown_class(): whether the host cannot be classed in ``hr_type``.

    Fine: an unknown OS or CPU. Coarse: only Windows, Linux, and Darwin on Intel or PowerPC
    are known."""
    if hr_type == FINE:
        return os_code(os_name) == NO_OS or cpu_fine(vendor, model) == NO_CPU
    if hr_type == COARSE:
        system = os_code(os_name)
        if system in (WINDOWS, LINUX):
            return False
        return not (system == DARWIN and cpu_coarse(vendor, model) in (INTEL, MACINTOSH))
    return False


OS_NAMES = {
    NO_OS: "unknown OS",
    LINUX: "Linux",
    WINDOWS: "Windows",
    DARWIN: "Darwin",
    FREEBSD: "FreeBSD",
    ANDROID: "Android",
}
CPU_NAMES = {
    NO_CPU: "unknown CPU",
    INTEL: "Intel",
    AMD: "AMD",
    MACINTOSH: "PowerPC",
    ARM: "ARM",
    AMD_ATHLON: "AMD Athlon",
    AMD_DURON: "AMD Duron",
    AMD_SEMPRON: "AMD Sempron",
    AMD_OPTERON: "AMD Opteron",
    AMD_ATHLON64: "AMD Athlon 64",
    AMD_ATHLON_XP: "AMD Athlon XP",
    INTEL_XEON: "Intel Xeon",
    INTEL_CELERON: "Intel Celeron",
    INTEL_PENTIUM: "Intel Pentium",
    INTEL_PENTIUM_II: "Intel Pentium II",
    INTEL_PENTIUM_III: "Intel Pentium III",
    INTEL_PENTIUM_4: "Intel Pentium 4",
    INTEL_PENTIUM_D: "Intel Pentium D",
    INTEL_PENTIUM_M: "Intel Pentium M",
    AMD_ATHLON_MP: "AMD Athlon MP",
    AMD_TURION: "AMD Turion",
    INTEL_CORE: "Intel Core",
}


def class_name(value: int) -> str:
    """A class in words: ``267`` -> "Linux, Intel Xeon"; 0 -> "not committed"."""
    if not value:
        return "not committed"
    system, cpu = value - value % 128, value % 128
    return f"{OS_NAMES.get(system, f'OS {system}')}, {CPU_NAMES.get(cpu, f'CPU {cpu}')}"
