// Model registry: names and the factory behind make_model (models.hpp).
#include "model_fit.hpp"

#include <aijpredict/error.hpp>

namespace aijp::model {

const char* family_name(family f)
{
  switch (f) {
    case family::constant: return "constant";
    case family::normal: return "normal";
    case family::uniform: return "uniform";
    case family::other: return "other";
  }
  return "unknown";
}

std::vector<std::string> model_names() { return {"guo_wang", "wang_gu_li_normal", "wang_gu_li_uniform", "aijp"}; }

std::unique_ptr<performance_model> make_model(const std::string& name)
{
  if (name == "guo_wang") return detail::make_guo_wang_model();
  if (name == "wang_gu_li_normal") return detail::make_wang_gu_li_model(family::normal);
  if (name == "wang_gu_li_uniform") return detail::make_wang_gu_li_model(family::uniform);
  if (name == "aijp") return detail::make_aijp_model();
  std::string valid;
  for (const auto& n : model_names()) valid += (valid.empty() ? "" : ", ") + n;
  AIJP_THROW(bad_input, "unknown performance model '" + name + "' (valid: " + valid + ")");
}

}  // namespace aijp::model
