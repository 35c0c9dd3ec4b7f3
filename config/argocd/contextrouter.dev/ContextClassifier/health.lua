-- Argo CD health of a contextrouter.dev ContextClassifier.
-- Healthy: Ready=True for the current generation (every router it attaches
-- to has it in its bundle, trained). Degraded: the spec is invalid (labels,
-- patterns, an examples file that does not parse) or the source of its files is
-- left out of a router's bundle: nothing changes until someone fixes it.
-- Progressing: a router or source it names does not exist yet (GitOps tools
-- apply objects in any order, so a missing reference is waited for), or a
-- router has not judged the current generation yet (Pending).
local hs = {}

local terminal = {InvalidSpec = true, InvalidSource = true}

local function condition(conditions, type)
  if conditions == nil then
    return nil
  end
  for _, c in ipairs(conditions) do
    if c.type == type then
      return c
    end
  end
  return nil
end

-- "Reason: message", the way kubectl shows a condition.
local function describe(c)
  local reason = c.reason or "Unknown"
  if c.message ~= nil and c.message ~= "" then
    return reason .. ": " .. c.message
  end
  return reason
end

local status = obj.status or {}
local ready = condition(status.conditions, "Ready")
local generation = obj.metadata.generation
if ready == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to report the Ready condition"
  return hs
end
local observed = status.observedGeneration or 0
if ready.observedGeneration ~= nil and ready.observedGeneration < observed then
  observed = ready.observedGeneration
end
if generation ~= nil and observed < generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. generation ..
    " (the status describes generation " .. observed .. ")"
  return hs
end

if ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message or ""
  return hs
end
if ready.status == "False" then
  if terminal[ready.reason] then
    hs.status = "Degraded"
    hs.message = describe(ready)
    return hs
  end
  -- Ready carries the first failing reason; a terminal one of any router
  -- still makes the classifier Degraded.
  for _, parent in ipairs(status.parents or {}) do
    for _, c in ipairs(parent.conditions or {}) do
      if c.status == "False" and terminal[c.reason] then
        hs.status = "Degraded"
        hs.message = describe(c)
        return hs
      end
    end
  end
end
hs.status = "Progressing"
hs.message = describe(ready)
return hs
