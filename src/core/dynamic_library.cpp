// Libraries opened with dlopen at first use (dynamic_library.hpp).
#include "core/dynamic_library.hpp"

#include <dlfcn.h>

#include "stepmix/error.hpp"

namespace stepmix::detail {

std::string open_first_library(const std::string& component, const std::vector<std::string>& candidates,
                               const std::function<std::string(const SymbolLookup&)>& resolve,
                               const std::string& what, const std::string& advice) {
  std::string tried;
  for (const std::string& candidate : candidates) {
    dlerror();
    // RTLD_LOCAL: its symbols stay out of the global namespace, as a linked
    // library's would not; the handle is never closed (the library's own
    // threads and static state live as long as the process).
    void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = dlerror();
      tried += "; " + (why ? std::string(why) : candidate + ": dlopen failed");  // dlerror names the file
      continue;
    }
    const std::string missing = resolve([handle](const char* name) { return dlsym(handle, name); });
    if (missing.empty()) return candidate;
    dlclose(handle);
    tried += "; " + candidate + ": lacks " + missing;
  }
  throw Error(component, what + ": no usable library (" +
                          (tried.empty() ? std::string("no candidates") : tried.substr(2)) + "); " + advice);
}

}  // namespace stepmix::detail
