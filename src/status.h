// Errors as values: the core never throws or aborts on bad input.
#ifndef MHA_SRC_STATUS_H_
#define MHA_SRC_STATUS_H_

#include <string>
#include <utility>

namespace mha {

enum class StatusCode { kOk = 0, kInvalidArgument = 1, kFailedPrecondition = 2, kOutOfMemory = 3 };

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string message) {
    return Status(StatusCode::kInvalidArgument, std::move(message));
  }
  static Status FailedPrecondition(std::string message) {
    return Status(StatusCode::kFailedPrecondition, std::move(message));
  }
  static Status OutOfMemory(std::string message) {
    return Status(StatusCode::kOutOfMemory, std::move(message));
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Returns early from the enclosing function when `expr` is an error.
#define MHA_RETURN_IF_ERROR(expr)          \
  do {                                     \
    ::mha::Status mha_status_ = (expr);    \
    if (!mha_status_.ok()) return mha_status_; \
  } while (0)

}  // namespace mha

#endif  // MHA_SRC_STATUS_H_
